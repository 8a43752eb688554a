package server

import (
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/api-frontend/procs"
)

// TestProcsWidenAtIdleStart: with a GOMAXPROCS controller (--procs auto), a
// generation request that starts at an idle server widens GOMAXPROCS to all
// cores (so the rest of a burst is taken in on every core), and a request
// that is not a generation (/tokenize) leaves it narrow.
func TestProcsWidenAtIdleStart(t *testing.T) {
	wide := runtime.GOMAXPROCS(0)
	if wide < 2 {
		t.Skip("needs GOMAXPROCS >= 2")
	}
	env := newTestEnv(t, Config{}, "abc")
	pc := procs.New(procs.Policy{Narrow: 1, Wide: wide, Hold: time.Second})
	t.Cleanup(pc.Close)
	env.srv.deps.Procs = pc
	narrow := func() {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); pc.Procs() != 1; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the controller did not narrow after its hold")
			}
		}
		if got := runtime.GOMAXPROCS(0); got != 1 {
			t.Fatalf("narrow: GOMAXPROCS %d, want 1", got)
		}
	}
	narrow()
	if r, _ := env.post("/tokenize", `{"prompt":"abc"}`); r.StatusCode != http.StatusOK {
		t.Fatalf("/tokenize: %d", r.StatusCode)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("after /tokenize: GOMAXPROCS %d, want 1", got)
	}
	if r, b := env.post("/v1/completions", `{"model":"m","prompt":"hi","max_tokens":3}`); r.StatusCode != http.StatusOK {
		t.Fatalf("completion: %d %s", r.StatusCode, b)
	}
	if got := runtime.GOMAXPROCS(0); got != wide {
		t.Fatalf("after a request at an idle server: GOMAXPROCS %d, want %d", got, wide)
	}
	narrow()
}
