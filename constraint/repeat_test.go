package constraint

import "testing"

func TestRepeatBounds(t *testing.T) {
	cases := []struct {
		lo, hi        string
		hasHi, openHi bool
		min, max      int
		ok            bool
	}{
		{"3", "", false, true, 3, 3, true},
		{"2", "", true, true, 2, -1, true},
		{"2", "", true, false, 0, 0, false},
		{"2", "5", true, false, 2, 5, true},
		{"5", "2", true, true, 0, 0, false},
		{"-1", "", false, true, 0, 0, false},
		{"x", "", false, true, 0, 0, false},
		{"0", "1001", true, true, 0, 0, false},
		{"1001", "", false, true, 0, 0, false},
		{"1000", "1000", true, false, 1000, 1000, true},
	}
	for _, c := range cases {
		m, n, ok := repeatBounds(c.lo, c.hi, c.hasHi, c.openHi)
		if ok != c.ok || ok && (m != c.min || n != c.max) {
			t.Errorf("repeatBounds(%q, %q, %v, %v) = %d, %d, %v; want %d, %d, %v", c.lo, c.hi, c.hasHi, c.openHi, m, n, ok, c.min, c.max, c.ok)
		}
	}
	for c, want := range map[byte][2]int{'*': {0, -1}, '+': {1, -1}, '?': {0, 1}} {
		if m, n, ok := simpleRepeat(c); !ok || m != want[0] || n != want[1] {
			t.Errorf("simpleRepeat(%q) = %d, %d, %v", c, m, n, ok)
		}
	}
	if _, _, ok := simpleRepeat('{'); ok {
		t.Error("simpleRepeat('{') ok")
	}
}
