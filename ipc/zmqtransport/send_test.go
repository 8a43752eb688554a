package zmqtransport

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/ipc"
)

// TestConcurrentSends: ADDs sent from many goroutines at once (a step's
// burst of requests; each Send encodes with its own codec) all reach the
// engine whole, each once.
func TestConcurrentSends(t *testing.T) {
	addr := ipcAddr(t)
	s := listen(t, addr)
	defer s.Close("test over")
	c := dial(t, addr, "fe-sends")
	defer c.Close()
	waitUp(t, c)
	const senders, each = 8, 50
	var wg sync.WaitGroup
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				prompt := make([]int32, 1+(g*each+i)%97) // frames of many sizes
				for k := range prompt {
					prompt[k] = int32(g*1000 + i)
				}
				req := &ipc.AddRequest{RequestID: fmt.Sprintf("r-%d-%d", g, i), PromptTokenIDs: prompt}
				if err := c.Send(ipc.KindAdd, req); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	seen := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for len(seen) < senders*each {
		select {
		case in := <-s.Inbound():
			if in.Kind != ipc.KindAdd {
				continue
			}
			id := in.Add.RequestID
			var g, i int
			if _, err := fmt.Sscanf(id, "r-%d-%d", &g, &i); err != nil {
				t.Fatalf("bad id %q", id)
			}
			p := in.Add.PromptTokenIDs
			if len(p) != 1+(g*each+i)%97 || p[0] != int32(g*1000+i) || p[len(p)-1] != int32(g*1000+i) {
				t.Fatalf("%s: prompt of %d tokens, first %d: corrupted", id, len(p), p[0])
			}
			if seen[id] {
				t.Fatalf("%s received twice", id)
			}
			seen[id] = true
		case <-deadline:
			t.Fatalf("%d of %d ADDs received within 10s", len(seen), senders*each)
		}
	}
}
