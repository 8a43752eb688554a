package launcher

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// maxLine is the longest partial line held back; a longer one is written
// out as it is.
const maxLine = 64 << 10

// lineWriter passes a child's output through to dst one whole line at a
// time, each line prefixed (e.g. "frontend-2 | "), so lines of different
// children never interleave. It keeps the last lines in tail when set.
type lineWriter struct {
	mu     *sync.Mutex // shared by every child writing to the same dst
	dst    io.Writer
	prefix string
	tail   *lineTail

	pend []byte // the unfinished line
	out  []byte // scratch for prefix+line
}

// Write buffers p and writes out every complete line. It never fails: a
// child must not die of SIGPIPE because the launcher's output is gone.
func (w *lineWriter) Write(p []byte) (int, error) {
	w.pend = append(w.pend, p...)
	start := 0
	for {
		i := bytes.IndexByte(w.pend[start:], '\n')
		if i < 0 {
			break
		}
		w.emit(w.pend[start : start+i])
		start += i + 1
	}
	n := copy(w.pend, w.pend[start:])
	w.pend = w.pend[:n]
	if len(w.pend) > maxLine {
		w.emit(w.pend)
		w.pend = w.pend[:0]
	}
	return len(p), nil
}

// Flush writes out an unfinished last line.
func (w *lineWriter) Flush() {
	if len(w.pend) > 0 {
		w.emit(w.pend)
		w.pend = w.pend[:0]
	}
}

// emit writes one line (without its newline) with the prefix.
func (w *lineWriter) emit(line []byte) {
	if w.tail != nil {
		w.tail.add(string(line))
	}
	w.out = append(append(append(w.out[:0], w.prefix...), line...), '\n')
	w.mu.Lock()
	_, _ = w.dst.Write(w.out)
	w.mu.Unlock()
}

// lineTail keeps the last n lines written to it.
type lineTail struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

func newLineTail(n int) *lineTail { return &lineTail{lines: make([]string, n)} }

func (t *lineTail) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines[t.next] = s
	t.next++
	if t.next == len(t.lines) {
		t.next, t.full = 0, true
	}
}

// String returns the kept lines, oldest first, each indented, joined by
// newlines.
func (t *lineTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ordered []string
	if t.full {
		ordered = append(ordered, t.lines[t.next:]...)
	}
	ordered = append(ordered, t.lines[:t.next]...)
	var b strings.Builder
	for i, l := range ordered {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("    ")
		b.WriteString(l)
	}
	return b.String()
}
