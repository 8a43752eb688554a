package constraint

import (
	"fmt"
	"regexp/syntax"
	"unicode"
	"unicode/utf8"
)

// MaxTerminalStates bounds the byte automaton of one terminal (regex) of a
// grammar: the engine's guide refuses a terminal whose Thompson NFA would
// have more states. The frontend checks it through Compile, so that a
// client's regex that expands too far (`\p{L}{1000}`: each \p{L} is a few
// hundred UTF-8 byte sequences) is a 400 naming the cause, never an engine
// error echoing the expanded class.
const MaxTerminalStates = 200_000

// TerminalStates returns how many states engine-core/guide's byte NFA for
// pattern (RE2 syntax) has, counting without building it; counts above
// MaxTerminalStates are reported as MaxTerminalStates+2.
func TerminalStates(pattern string) (int, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0, fmt.Errorf("parse regex: %w", err)
	}
	return nfaSize(re.Simplify(), map[*syntax.Regexp]int{}) + 1, nil
}

// checkTerminalSizes returns an error when some terminal of g would build
// an automaton of more than MaxTerminalStates states.
func checkTerminalSizes(kind string, g *Grammar) error {
	for i, t := range g.Terminals {
		n, err := TerminalStates(t)
		if err != nil {
			continue // Check reports bad patterns with their own message
		}
		if n > MaxTerminalStates {
			what := "regex"
			if len(g.Terminals) > 1 {
				what = fmt.Sprintf("pattern %d of the grammar", i+1)
			}
			return fmt.Errorf("%s: %s is too complex: its automaton would exceed %d states (a large repeat of a broad character class such as \\p{L}{1000}?)", kind, what, MaxTerminalStates)
		}
	}
	return nil
}

// nfaSize counts the states engine-core/guide's NFA builder makes for re
// (saturating above MaxTerminalStates); memo shares the count of the
// sub-expressions Simplify repeats by pointer.
func nfaSize(re *syntax.Regexp, memo map[*syntax.Regexp]int) int {
	if n, ok := memo[re]; ok {
		return n
	}
	n := 0
	switch re.Op {
	case syntax.OpNoMatch:
		n = 1
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				ranges := []rune{r, r}
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					ranges = append(ranges, f, f)
				}
				n += classSize(ranges)
			} else {
				n += utf8.RuneLen(r)
			}
		}
	case syntax.OpCharClass:
		n = classSize(re.Rune)
	case syntax.OpAnyChar:
		n = classSize([]rune{0, utf8.MaxRune})
	case syntax.OpAnyCharNotNL:
		n = classSize([]rune{0, '\n' - 1, '\n' + 1, utf8.MaxRune})
	case syntax.OpCapture:
		n = nfaSize(re.Sub[0], memo)
	case syntax.OpConcat:
		for _, s := range re.Sub {
			n += nfaSize(s, memo)
			if n > MaxTerminalStates {
				break
			}
		}
	case syntax.OpAlternate:
		if len(re.Sub) == 0 {
			n = 1 // a fail state
			break
		}
		n = len(re.Sub) - 1 // the splits joining the alternatives
		for _, s := range re.Sub {
			n += nfaSize(s, memo)
			if n > MaxTerminalStates {
				break
			}
		}
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		n = 1 + nfaSize(re.Sub[0], memo)
	}
	n = min(n, MaxTerminalStates+1)
	memo[re] = n
	return n
}

// classSize counts the states of a class: one per byte of each UTF-8
// sequence, plus the splits joining the sequences.
func classSize(ranges []rune) int {
	seqs, bytes := 0, 0
	for i := 0; i+1 < len(ranges); i += 2 {
		UTF8Split(ranges[i], ranges[i+1], func(lo, _ rune) { seqs++; bytes += utf8.RuneLen(lo) })
	}
	if seqs == 0 {
		return 1 // a fail state
	}
	return bytes + seqs - 1
}

// UTF8Split splits the runes [lo, hi] (surrogates excluded) into the
// sub-ranges whose UTF-8 encodings are each one sequence of byte ranges:
// every rune of a sub-range [a, b] has the encoding length of a, and byte i
// of its encoding lies between byte i of a's and of b's encodings — the
// construction RE2 and regex-automata use. It calls emit once per
// sub-range, in order. engine-core/guide builds its byte automaton from it
// and EstimateNFA counts with it, so the two always agree.
func UTF8Split(lo, hi rune, emit func(lo, hi rune)) {
	if lo > hi || lo > utf8.MaxRune {
		return
	}
	hi = min(hi, utf8.MaxRune)
	if lo < 0xD800 && hi > 0xDFFF {
		UTF8Split(lo, 0xD7FF, emit)
		UTF8Split(0xE000, hi, emit)
		return
	}
	if lo >= 0xD800 && lo <= 0xDFFF {
		lo = 0xE000
	}
	if hi >= 0xD800 && hi <= 0xDFFF {
		hi = 0xD7FF
	}
	if lo > hi {
		return
	}
	for _, m := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= m && hi > m {
			UTF8Split(lo, m, emit)
			UTF8Split(m+1, hi, emit)
			return
		}
	}
	if hi <= 0x7F {
		emit(lo, hi)
		return
	}
	for i := 1; i < 4; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				UTF8Split(lo, lo|m, emit)
				UTF8Split((lo|m)+1, hi, emit)
				return
			}
			if hi&m != m {
				UTF8Split(lo, (hi&^m)-1, emit)
				UTF8Split(hi&^m, hi, emit)
				return
			}
		}
	}
	emit(lo, hi)
}

// MaxGrammarBytes is the default of the most memory one compiled grammar
// may take in the engine, as EstimateBytes counts it (the frontend's and
// engine-core's --max-grammar-bytes). Compile refuses larger grammars, and
// CompileLimit and CheckBytes take the configured limit, so the frontend's
// compile check answers 400 and the engine refuses them too
// (20 distinct 10 000-property JSON schemas once took engine-core from
// 17 MB to 1.69 GB).
const MaxGrammarBytes = 64 << 20

// Per-part costs of EstimateBytes, measured on engine-core/guide: 10 000
// string properties (10 007 terminals, 79 643 NFA states, 150 004 grammar
// symbols) grew the heap by 98 MB.
const (
	bytesPerTerminal = 9 << 10
	bytesPerNFAState = 64
	bytesPerSymbol   = 16
)

// EstimateBytes estimates the engine memory of g once compiled: its
// terminals' automata (a fixed cost each plus their NFA states) and its
// rule symbols. Masks computed later are bounded separately by the guide's
// caches.
func EstimateBytes(g *Grammar) int64 {
	var n int64
	for _, t := range g.Terminals {
		states, err := TerminalStates(t)
		if err != nil {
			states = 0
		}
		n += bytesPerTerminal + bytesPerNFAState*int64(states)
	}
	for _, r := range g.Rules {
		for _, a := range r.Alts {
			n += bytesPerSymbol * int64(len(a)+1)
		}
	}
	return n
}
