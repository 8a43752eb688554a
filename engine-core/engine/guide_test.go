package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-llm/sluice/engine-core/guide"
	"github.com/sluice-llm/sluice/ipc"
)

// TestLazyGuide checks the background-built guide: NewMatcher waits for
// the build, then compiles on the vocabulary it made; a failed build
// refuses constrained requests with the reason.
func TestLazyGuide(t *testing.T) {
	vocab := func() (*guideAdapter, error) {
		v, err := guide.NewVocab([][]byte{[]byte("a"), []byte("b"), []byte("</s>")}, []int32{2}, nil)
		if err != nil {
			return nil, err
		}
		return &guideAdapter{c: guide.NewCompilerWithOptions(v, guide.Options{CacheSize: 4}), size: v.Size(), timeout: time.Second}, nil
	}
	grammar := &ipc.Constraint{Kind: "grammar", Spec: `root ::= "a" "b"`, Hash: "h-ab"}
	for _, c := range []struct {
		name    string
		build   func() (*guideAdapter, error)
		wantErr string
	}{
		{"ok", vocab, ""},
		{"no tokenizer", func() (*guideAdapter, error) { return nil, errors.New("no tokenizer: missing") }, "structured outputs are disabled: no tokenizer: missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			release := make(chan struct{})
			l := newLazyGuide(zap.NewNop(), func() (*guideAdapter, error) {
				<-release
				return c.build()
			})
			got := make(chan error, 1)
			go func() {
				m, err := l.NewMatcher(grammar)
				if err == nil && m == nil {
					err = errors.New("nil matcher")
				}
				got <- err
			}()
			select {
			case <-got:
				t.Fatal("NewMatcher returned before the vocabulary was built")
			case <-time.After(20 * time.Millisecond):
			}
			close(release)
			err := <-got
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("NewMatcher: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("NewMatcher error %v, want %q", err, c.wantErr)
			}
		})
	}
}

// TestComputeProcs checks that the compute threads leave the transport a
// processor of its own.
func TestComputeProcs(t *testing.T) {
	for _, c := range []struct{ threads, gomaxprocs, compute, procs int }{
		{0, 2, 2, 3},
		{2, 2, 2, 3},
		{1, 2, 1, 2},
		{1, 1, 1, 2},
		{4, 16, 4, 16},
		{0, 16, 16, 17},
		{8, 4, 8, 9},
	} {
		compute, procs := computeProcs(c.threads, c.gomaxprocs)
		if compute != c.compute || procs != c.procs {
			t.Errorf("computeProcs(%d, %d) = %d, %d; want %d, %d", c.threads, c.gomaxprocs, compute, procs, c.compute, c.procs)
		}
	}
}
