package splitmix

import "testing"

// TestMixVectors checks Mix against splitmix64's published sequence: the
// generator's outputs for seed 0 are Mix(k·Golden) for k = 1, 2, 3.
func TestMixVectors(t *testing.T) {
	want := []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}
	for k, w := range want {
		if got := Mix(uint64(k+1) * Golden); got != w {
			t.Errorf("Mix(%d·Golden) = %#x, want %#x", k+1, got, w)
		}
	}
}
