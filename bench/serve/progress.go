package serve

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progress draws a tqdm-like bar on a terminal line until stopped.
type progress struct {
	w     io.Writer
	total int
	done  *atomic.Int64
	start time.Time
	quit  chan struct{}
	wg    sync.WaitGroup
}

// startProgress redraws the bar every 250 ms from done's count.
func startProgress(w io.Writer, total int, done *atomic.Int64) *progress {
	p := &progress{w: w, total: total, done: done, start: time.Now(), quit: make(chan struct{})}
	p.wg.Go(func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.draw()
			case <-p.quit:
				return
			}
		}
	})
	return p
}

// stop draws the final state and ends the line.
func (p *progress) stop() {
	close(p.quit)
	p.wg.Wait()
	p.draw()
	fmt.Fprintln(p.w)
}

func (p *progress) draw() {
	n := int(p.done.Load())
	elapsed := time.Since(p.start)
	frac := float64(n) / float64(max(p.total, 1))
	const width = 30
	filled := int(frac * width)
	rate := float64(n) / max(elapsed.Seconds(), 1e-9)
	eta := "?"
	if n > 0 {
		eta = clock(time.Duration(float64(p.total-n) / rate * float64(time.Second)))
	}
	fmt.Fprintf(p.w, "\r%3.0f%%|%s%s| %d/%d [%s<%s, %.2f it/s]",
		frac*100, strings.Repeat("█", filled), strings.Repeat(" ", width-filled), n, p.total, clock(elapsed), eta, rate)
}

// clock formats d as mm:ss.
func clock(d time.Duration) string {
	s := int(d.Seconds())
	return fmt.Sprintf("%02d:%02d", s/60, s%60)
}
