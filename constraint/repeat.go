package constraint

import "strconv"

// simpleRepeat gives the bounds of the postfix operators that GBNF and Lark
// share: * (0 or more), + (1 or more) and ? (0 or 1); max -1 means
// unbounded. ok is false for any other byte.
func simpleRepeat(c byte) (min, max int, ok bool) {
	switch c {
	case '*':
		return 0, -1, true
	case '+':
		return 1, -1, true
	case '?':
		return 0, 1, true
	}
	return 0, 0, false
}

// repeatBounds reads the numeric bounds of a counted repetition: GBNF's
// {m}, {m,} and {m,n}, Lark's ~ m and ~ m..n. lo and hi are the texts on
// either side of the separator, hasHi says whether the separator was
// there, and openHi allows an empty hi to mean unbounded (GBNF's {m,}).
// Both bounds must lie in [0, maxRepeat] with min ≤ max.
func repeatBounds(lo, hi string, hasHi, openHi bool) (min, max int, ok bool) {
	m, err := strconv.Atoi(lo)
	if err != nil || m < 0 || m > maxRepeat {
		return 0, 0, false
	}
	if !hasHi {
		return m, m, true
	}
	if hi == "" && openHi {
		return m, -1, true
	}
	n, err := strconv.Atoi(hi)
	if err != nil || n < m || n > maxRepeat {
		return 0, 0, false
	}
	return m, n, true
}

// repeatOf wraps e in a repetition node with the given bounds.
func repeatOf(e *gexpr, min, max int) *gexpr {
	return &gexpr{kind: gRepeat, subs: []*gexpr{e}, min: min, max: max}
}
