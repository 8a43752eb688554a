package core

import (
	"fmt"
	"testing"

	"github.com/sluice-llm/sluice/engine-core/kvcache"
	"github.com/sluice-llm/sluice/engine-core/sched"
	"github.com/sluice-llm/sluice/engine-core/simexec"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/ipc/zmqtransport"
)

type discard struct{ n int }

func (d *discard) Inbound() <-chan zmqtransport.Inbound         { return nil }
func (d *discard) SendOutputs(string, *ipc.Outputs)             { d.n++ }
func (d *discard) SendUtilityResult(string, *ipc.UtilityResult) {}
func (d *discard) Close(string)                                 {}

// BenchmarkLoopStep measures the engine loop's host cost per decode step
// with 1024 running requests from 4 frontends and a zero-time simulated
// accelerator: Schedule, Execute (sim token choice), Update, grouping per
// frontend and hand-off.
//
//	go test -run '^$' -bench LoopStep -benchmem ./engine-core/core/
func BenchmarkLoopStep(b *testing.B) {
	const n, steps = 1024, 256
	tr := &discard{}
	var c *Core
	round := steps
	b.ReportAllocs()
	for b.Loop() {
		if round == steps {
			b.StopTimer()
			s := sched.New(sched.Config{MaxNumSeqs: n, MaxNumBatchedTokens: 16384, MaxModelLen: 4096, EOSTokenIDs: []int32{2}}, kvcache.New(n*24, 16))
			ex, err := simexec.New(simexec.Config{VocabSize: 32000, EOSTokenIDs: []int32{2}})
			if err != nil {
				b.Fatal(err)
			}
			c, _ = New(Options{EngineID: "bench", Sched: s, Exec: ex, Transport: tr})
			for i := range n {
				m := add(fmt.Sprintf("fe%d", i%4), fmt.Sprintf("r%d", i), 64, 1000)
				c.handle(m)
			}
			for s.NumRunning() < n || s.NumWaiting() > 0 {
				c.Step()
				c.flush()
			}
			round = 0
			b.StartTimer()
		}
		c.Step()
		c.flush()
		round++
	}
	if tr.n == 0 {
		b.Fatal("no outputs")
	}
}
