package guide

import (
	"runtime"
	"testing"
)

func TestDbgCount(t *testing.T) {
	runtime.LockOSThread()
	v := realVocabs(t)[2].v
	term, _ := newTerminal(`"(?:[^"\\\x00-\x1F\x7F]|\\(?:["\\/bfnrt]|u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F]|[dD][0-7][0-9a-fA-F][0-9a-fA-F]))){0,80}"`, 0)
	q := term.d.next(term.d.start, '"')
	for k := 0; k < 12; k++ {
		t0 := threadCPU()
		r, ok := countState(v.plain, term, q)
		t1 := threadCPU()
		w := term.walkInner(q, v, v.plain.rest)
		t2 := threadCPU()
		im := w.finish()
		t3 := threadCPU()
		t.Logf("k=%d r=%d ok=%v count %v walk %v finish %v bounds %d states %d", k, r, ok, t1-t0, t2-t1, t3-t2, len(im.bounds), len(term.d.sets))
		q = term.d.next(q, 'a')
	}
}
