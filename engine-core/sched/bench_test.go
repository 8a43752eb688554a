package sched

import (
	"fmt"
	"testing"

	"github.com/sluice-llm/sluice/engine-core/kvcache"
	"github.com/sluice-llm/sluice/engine-core/sample"
	"github.com/sluice-llm/sluice/ipc"
)

// BenchmarkScheduleUpdate measures one decode step (Schedule + Update) with
// 256 and 1024 running requests, excluding the fake executor; window=128
// adds gpt-oss's sliding-window table (trimmed as the sequences grow past
// 128 positions).
//
//	go test -run '^$' -bench ScheduleUpdate -benchmem ./engine-core/sched/
func BenchmarkScheduleUpdate(b *testing.B) {
	for _, n := range []int{256, 1024} {
		b.Run(fmt.Sprintf("running=%d", n), func(b *testing.B) { benchSteps(b, n, 0) })
	}
	b.Run("running=1024,window=128", func(b *testing.B) { benchSteps(b, 1024, 128) })
}

func benchSteps(b *testing.B, n, window int) {
	const stepsPerRound = 256
	const prompt = 32
	results := make([]sample.Result, n)
	emitted := 0
	emit := func(*ipc.Output) { emitted++ }
	b.ReportAllocs()
	var s *Scheduler
	round := stepsPerRound
	now := 0.0
	for b.Loop() {
		if round == stepsPerRound {
			b.StopTimer()
			pool := kvcache.New(n*((prompt+stepsPerRound)/16+2+(window+15)/16+1), 16)
			s = New(Config{MaxNumSeqs: n, MaxNumBatchedTokens: 8192, MaxModelLen: 4096, EOSTokenIDs: []int32{2}, SlidingWindow: window}, pool)
			for i := range n {
				req := &ipc.AddRequest{RequestID: fmt.Sprintf("req-%d", i), PromptTokenIDs: make([]int32, prompt)}
				for j := range req.PromptTokenIDs {
					req.PromptTokenIDs[j] = int32(10 + (i*prompt+j)%30000)
				}
				req.Params.MaxTokens = 1000
				req.Params.Logprobs = -1
				if err := s.Add(req, now); err != nil {
					b.Fatal(err)
				}
			}
			for s.NumWaiting() > 0 || s.NumRunning() < n {
				bt := s.Schedule(now)
				s.Update(bt, results, now, emit)
			}
			round = 0
			b.StartTimer()
		}
		now++
		bt := s.Schedule(now)
		for i := range bt.Seqs {
			results[i].Token = int32(100 + i)
		}
		s.Update(bt, results, now, emit)
		s.DrainReleased(func(string) {})
		round++
	}
	if emitted == 0 {
		b.Fatal("nothing emitted")
	}
}
