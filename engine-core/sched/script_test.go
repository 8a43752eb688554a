package sched

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/engine-core/internal/splitmix"
	"github.com/sluice-llm/sluice/engine-core/kvcache"
	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/ipc"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The scenario DSL (testdata/*.txt; expected traces in *.golden):
//
//	config blocks=N block=B seqs=S tokens=T len=L eos=E [window=W] [noprefix]
//	add ID prompt=N [max=M] [min=K] [prio=P] [prefix=NAME:LEN] [ignore_eos] [stop=a,b] [seed=S]
//	force ID TOK        the next token sampled for ID is TOK
//	step [N]            run N steps (default 1), printing each
//	run [LIMIT]         step until idle (at most LIMIT steps, default 1000)
//	abort ID
//	reset-cache
//	stats
//
// Prompts are deterministic: the first LEN tokens of a prefix come from a
// sequence named NAME (shared between requests naming it), the rest from
// the request id. The fake executor samples 1000+position unless forced.
type harness struct {
	t       *testing.T
	s       *Scheduler
	kv      *kvcache.Pool
	out     strings.Builder
	forced  map[string][]int32
	results []sample.Result
	now     float64
	ended   map[string]int // finished outputs per request
	added   map[string]bool
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".txt")
		t.Run(name, func(t *testing.T) {
			script, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			h := &harness{t: t, forced: map[string][]int32{}, ended: map[string]int{}, added: map[string]bool{}}
			for _, line := range strings.Split(string(script), "\n") {
				line = strings.TrimSpace(line)
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				fmt.Fprintf(&h.out, "> %s\n", line)
				h.exec(line)
			}
			if h.s != nil {
				if msg := h.kv.CheckInvariants(); msg != "" {
					t.Errorf("kv invariant: %s", msg)
				}
			}
			got := h.out.String()
			golden := strings.TrimSuffix(f, ".txt") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			if got != string(want) {
				t.Errorf("trace differs from %s (rerun with -update if intended)\n--- got ---\n%s", golden, got)
			}
		})
	}
}

func kv(args []string) map[string]string {
	m := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		m[k] = v
	}
	return m
}

func atoi(t *testing.T, s string, def int) int {
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad number %q", s)
	}
	return n
}

func (h *harness) exec(line string) {
	t := h.t
	f := strings.Fields(line)
	switch f[0] {
	case "config":
		a := kv(f[1:])
		h.kv = kvcache.New(atoi(t, a["blocks"], 16), atoi(t, a["block"], 4))
		_, noprefix := a["noprefix"]
		h.s = New(Config{
			MaxNumSeqs:           atoi(t, a["seqs"], 4),
			MaxNumBatchedTokens:  atoi(t, a["tokens"], 32),
			MaxModelLen:          atoi(t, a["len"], 64),
			EOSTokenIDs:          []int32{int32(atoi(t, a["eos"], 2))},
			DisablePrefixCaching: noprefix,
			SlidingWindow:        atoi(t, a["window"], 0),
		}, h.kv)
	case "add":
		id := f[1]
		a := kv(f[2:])
		req := &ipc.AddRequest{RequestID: id, Priority: int32(atoi(t, a["prio"], 0))}
		req.PromptTokenIDs = makePrompt(id, atoi(t, a["prompt"], 8), a["prefix"])
		p := &req.Params
		p.MaxTokens = int32(atoi(t, a["max"], 0))
		p.MinTokens = int32(atoi(t, a["min"], 0))
		p.Logprobs = -1
		_, p.IgnoreEOS = a["ignore_eos"]
		if st := a["stop"]; st != "" {
			for _, x := range strings.Split(st, ",") {
				p.StopTokenIDs = append(p.StopTokenIDs, int32(atoi(t, x, 0)))
			}
		}
		if err := h.s.Add(req, h.now); err != nil {
			fmt.Fprintf(&h.out, "error: %v\n", err)
		} else {
			h.added[id] = true
		}
	case "force":
		h.forced[f[1]] = append(h.forced[f[1]], int32(atoi(t, f[2], 0)))
	case "step":
		n := 1
		if len(f) > 1 {
			n = atoi(t, f[1], 1)
		}
		for range n {
			h.step()
		}
	case "run":
		limit := 1000
		if len(f) > 1 {
			limit = atoi(t, f[1], 1000)
		}
		for i := 0; i < limit && h.s.HasWork(); i++ {
			h.step()
		}
		if h.s.HasWork() {
			fmt.Fprintf(&h.out, "still busy after %d steps\n", limit)
		}
	case "abort":
		fmt.Fprintf(&h.out, "aborted=%v\n", h.s.Abort(f[1]))
		h.drain()
	case "reset-cache":
		fmt.Fprintf(&h.out, "dropped %d cached blocks\n", h.s.ResetPrefixCache())
	case "stats":
		st := h.s.Stats()
		fmt.Fprintf(&h.out, "running=%d waiting=%d kv=%.3f prefix=%d/%d preemptions=%d generated=%d prompt=%d finished=%d steps=%d\n",
			st.Running, st.Waiting, st.KVUsage, st.PrefixHits, st.PrefixQueries, st.Preemptions, st.GeneratedTokens, st.PromptTokens, st.FinishedRequests, st.StepCount)
	default:
		t.Fatalf("unknown command %q", f[0])
	}
}

// makePrompt builds a deterministic prompt: prefix tokens from the named
// sequence, then tokens derived from the request id.
func makePrompt(id string, n int, prefix string) []int32 {
	out := make([]int32, 0, n)
	if prefix != "" {
		name, l, _ := strings.Cut(prefix, ":")
		ln, _ := strconv.Atoi(l)
		seed := uint64(0)
		for _, c := range name {
			seed = seed*131 + uint64(c)
		}
		for i := 0; i < ln && len(out) < n; i++ {
			out = append(out, int32(10+splitmix.Mix(seed+uint64(i))%500))
		}
	}
	seed := uint64(7)
	for _, c := range id {
		seed = seed*131 + uint64(c)
	}
	for i := 0; len(out) < n; i++ {
		out = append(out, int32(600+splitmix.Mix(seed+uint64(i)+1<<20)%300))
	}
	return out
}

func (h *harness) drain() {
	var ids []string
	h.s.DrainReleased(func(id string) { ids = append(ids, id) })
	if len(ids) > 0 {
		fmt.Fprintf(&h.out, "  released %s\n", strings.Join(ids, " "))
	}
}

func (h *harness) step() {
	h.now++
	b := h.s.Schedule(h.now)
	fmt.Fprintf(&h.out, "step %d: %d seqs, %d tokens\n", b.Step, len(b.Seqs), b.NumTokens)
	if b.NumTokens > h.s.cfg.MaxNumBatchedTokens || len(b.Seqs) > h.s.cfg.MaxNumSeqs {
		h.t.Errorf("step %d over budget: %d tokens %d seqs", b.Step, b.NumTokens, len(b.Seqs))
	}
	h.drain()
	h.results = slices.Grow(h.results[:0], len(b.Seqs))[:len(b.Seqs)]
	for i, sw := range b.Seqs {
		kind := "prefill"
		if sw.StartPos >= sw.In.NumPrompt {
			kind = "decode"
		}
		end := sw.StartPos + len(sw.Tokens)
		fmt.Fprintf(&h.out, "  %s %s %d..%d blocks=%v", sw.ReqID, kind, sw.StartPos, end, sw.BlockTable)
		if sw.WindowTable != nil {
			fmt.Fprintf(&h.out, " win=%v", sw.WindowTable)
		}
		if sw.Sample {
			h.out.WriteString(" sample")
		}
		h.out.WriteString("\n")
		if need := h.kv.BlocksFor(end); len(sw.BlockTable) < need {
			h.t.Errorf("%s: block table %d < %d needed", sw.ReqID, len(sw.BlockTable), need)
		}
		tok := int32(1000 + len(sw.In.History) - sw.In.NumPrompt)
		if q := h.forced[sw.ReqID]; len(q) > 0 && sw.Sample {
			tok = q[0]
			h.forced[sw.ReqID] = q[1:]
		}
		h.results[i] = sample.Result{Token: tok}
	}
	h.s.Update(b, h.results, h.now, func(o *ipc.Output) {
		fmt.Fprintf(&h.out, "  -> %s %v", o.RequestID, o.NewTokenIDs)
		if o.FinishReason != ipc.FinishNone {
			fmt.Fprintf(&h.out, " finish=%s", o.FinishReason)
			if o.StopReason >= 0 {
				fmt.Fprintf(&h.out, " stop_reason=%d", o.StopReason)
			}
			h.ended[o.RequestID]++
		}
		if o.NumCachedTokens > 0 {
			fmt.Fprintf(&h.out, " cached=%d", o.NumCachedTokens)
		}
		for _, e := range o.Events {
			fmt.Fprintf(&h.out, " %s@%g", eventName(e.Type), e.Timestamp)
		}
		h.out.WriteString("\n")
	})
	h.drain()
	st := h.kv.Stats()
	fmt.Fprintf(&h.out, "  kv free=%d/%d cached=%d running=%d waiting=%d\n", st.NumFree, st.NumBlocks, st.NumCached, h.s.NumRunning(), h.s.NumWaiting())
}

func eventName(t ipc.EventType) string {
	switch t {
	case ipc.EventQueued:
		return "queued"
	case ipc.EventScheduled:
		return "scheduled"
	case ipc.EventFirstToken:
		return "first_token"
	case ipc.EventPreempted:
		return "preempted"
	}
	return "?"
}
