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
