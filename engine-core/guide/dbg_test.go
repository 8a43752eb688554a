package guide

import (
	"runtime"
	"testing"
	"time"
)

func TestDbgCold(t *testing.T) {
	runtime.LockOSThread()
	rv := realVocabs(t)[2]
	c := NewCompiler(rv.v, 64)
	for _, rc := range loadReplay(t) {
		ct := rc.constraint(t)
		for _, inst := range rc.Instances {
			m := mustMatcher(t, c, ct)
			toks := spell(t, m, inst)
			m = mustMatcher(t, c, ct)
			mask := NewBitmask(rv.v.Size())
			var out []byte
			for _, tok := range toks {
				cur, _ := m.cur()
				st := threadCPU()
				m.Mask(mask)
				if d := threadCPU() - st; d > 300*time.Microsecond {
					var ts []string
					for _, th := range cur {
						p := m.g.terms[m.g.syms[th.pos]].pattern
						ts = append(ts, p[:min(30, len(p))])
					}
					t.Logf("%s %v after %q: %d threads %q", rc.Name, d, out[max(0, len(out)-20):], len(cur), ts)
				}
				m.Accept(tok)
				out = append(out, rv.v.toks[tok]...)
			}
		}
	}
}
