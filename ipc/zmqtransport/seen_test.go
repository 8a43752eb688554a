package zmqtransport

import (
	"testing"
	"time"
)

// TestSeenAfterWake: the I/O loop's own lateness (a wake-up gap beyond
// housekeepingMax) does not count against the engine's liveness; on-time
// wake-ups change nothing, so a silent engine is still called down after
// the timeout.
func TestSeenAfterWake(t *testing.T) {
	t0 := time.Unix(100, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const live = 3 * time.Second
	tests := []struct {
		name                  string
		seen, wake, now, want time.Time
	}{
		{"first wake-up", at(0), time.Time{}, at(5000), at(0)},
		{"on time", at(0), at(1000), at(2000), at(0)},
		{"within the margin", at(0), at(1000), at(2100), at(0)},
		{"late 1.5 s (starved 2.5 s)", at(0), at(500), at(3000), at(1500)},
		{"late, capped at now", at(2500), at(500), at(3000), at(3000)},
		{"past the timeout: fresh period", at(0), at(500), at(4000), at(4000)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := seenAfterWake(tc.seen, tc.wake, tc.now, live); !got.Equal(tc.want) {
				t.Fatalf("seenAfterWake = %v, want %v", got.Sub(t0), tc.want.Sub(t0))
			}
		})
	}
}
