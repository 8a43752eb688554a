package frontend

import "testing"

func TestProcs(t *testing.T) {
	tests := []struct {
		name                 string
		cores, engines, want int
	}{
		{"one engine on two cores", 2, 1, 1},
		{"one engine on sixteen cores", 16, 1, 1},
		{"two engines on two cores", 2, 2, 2},
		{"four engines on two cores", 2, 4, 2},
		{"three engines on eight cores", 8, 3, 3},
		{"no engine", 4, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Procs(tt.cores, tt.engines); got != tt.want {
				t.Fatalf("Procs(%d, %d) = %d, want %d", tt.cores, tt.engines, got, tt.want)
			}
		})
	}
}
