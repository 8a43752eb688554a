package launcher

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

func TestLineWriter(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string
		tail   string
	}{
		{"whole lines", []string{"a\nb\n"}, "p | a\np | b\n", "    a\n    b"},
		{"split line", []string{"hel", "lo\nwor", "ld\n"}, "p | hello\np | world\n", "    hello\n    world"},
		{"unfinished last line flushed", []string{"x\ny"}, "p | x\np | y\n", "    x\n    y"},
		{"empty line", []string{"\n"}, "p | \n", "    "},
		{"nothing", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			tail := newLineTail(4)
			w := &lineWriter{mu: &sync.Mutex{}, dst: &out, prefix: "p | ", tail: tail}
			for _, s := range tt.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			w.Flush()
			if out.String() != tt.want {
				t.Errorf("output %q, want %q", out.String(), tt.want)
			}
			if tail.String() != tt.tail {
				t.Errorf("tail %q, want %q", tail.String(), tt.tail)
			}
		})
	}
}

func TestLineWriterLongLine(t *testing.T) {
	var out bytes.Buffer
	w := &lineWriter{mu: &sync.Mutex{}, dst: &out}
	long := strings.Repeat("x", maxLine+1)
	_, _ = w.Write([]byte(long))
	if out.Len() != len(long)+1 {
		t.Fatalf("a line longer than %d bytes was held back: wrote %d bytes", maxLine, out.Len())
	}
	if len(w.pend) != 0 {
		t.Fatalf("%d bytes still pending", len(w.pend))
	}
}

func TestLineTailKeepsLast(t *testing.T) {
	tail := newLineTail(3)
	for _, s := range []string{"1", "2", "3", "4", "5"} {
		tail.add(s)
	}
	if got, want := tail.String(), "    3\n    4\n    5"; got != want {
		t.Fatalf("tail %q, want %q", got, want)
	}
}
