package sched

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/engine-core/kvcache"
	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/ipc"
)

// digits allows ids 100..109 and is done after n tokens.
type digits struct {
	n, got int
}

func (d *digits) Allowed(id int32) bool { return id >= 100 && id < 110 }
func (d *digits) AllowedIDs() []int32 {
	return []int32{100, 101, 102, 103, 104, 105, 106, 107, 108, 109}
}
func (d *digits) Mask() sample.Mask { return d }
func (d *digits) IsDone() bool      { return d.got >= d.n }
func (d *digits) Accept(tok int32) error {
	if !d.Allowed(tok) {
		return errors.New("not a digit")
	}
	d.got++
	return nil
}

type digitGuide struct{}

func (digitGuide) NewMatcher(c *ipc.Constraint) (Matcher, error) {
	if c.Kind != "regex" {
		return nil, errors.New("only regex")
	}
	return &digits{n: 3}, nil
}

func TestGuide(t *testing.T) {
	req := func(id, kind string) *ipc.AddRequest {
		return &ipc.AddRequest{RequestID: id, PromptTokenIDs: []int32{5, 6},
			Params: ipc.SamplingParams{Logprobs: -1, MaxTokens: 10, Constraint: &ipc.Constraint{Kind: kind, Spec: "[0-9]{3}"}}}
	}
	plain := New(Config{MaxModelLen: 64}, kvcache.New(16, 4))
	if err := plain.Add(req("x", "regex"), 0); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("constraint without a guide: %v", err)
	}
	s := New(Config{MaxModelLen: 64, EOSTokenIDs: []int32{2}, Guide: digitGuide{}}, kvcache.New(16, 4))
	if err := s.Add(req("bad", "grammar"), 0); err == nil || !strings.Contains(err.Error(), "only regex") {
		t.Fatalf("uncompilable constraint: %v", err)
	}
	for _, id := range []string{"ok", "broken"} {
		if err := s.Add(req(id, "regex"), 0); err != nil {
			t.Fatal(err)
		}
	}
	finish := map[string]ipc.FinishReason{}
	msgs := map[string]string{}
	counts := map[string]int{}
	for step := 0; step < 10 && s.HasWork(); step++ {
		b := s.Schedule(float64(step))
		res := make([]sample.Result, len(b.Seqs))
		for i, sw := range b.Seqs {
			if sw.Sample && sw.In.Mask == nil {
				t.Fatalf("%s: no mask on a sampled step", sw.ReqID)
			}
			res[i].Token = 101
			if sw.ReqID == "broken" && counts["broken"] == 1 {
				res[i].Token = 50
			}
		}
		s.Update(b, res, float64(step), func(o *ipc.Output) {
			counts[o.RequestID]++
			if o.FinishReason != ipc.FinishNone {
				finish[o.RequestID], msgs[o.RequestID] = o.FinishReason, o.Error
			}
		})
	}
	if finish["ok"] != ipc.FinishStop || counts["ok"] != 3 {
		t.Errorf("ok: finish %v after %d tokens, want stop after 3", finish["ok"], counts["ok"])
	}
	if finish["broken"] != ipc.FinishError || !strings.Contains(msgs["broken"], "not a digit") {
		t.Errorf("broken: finish %v %q", finish["broken"], msgs["broken"])
	}
}
