// Package stopstr finds stop strings in streamed text.
//
// A Matcher is fed the text deltas of one completion as the incremental
// detokenizer produces them. It runs an Aho–Corasick automaton over the
// stop strings, so each Add costs O(len(delta)) amortised whatever the
// number of stop strings (a linear scan per stop string made a request with
// 100 000 stop strings and n 64 stall the frontend), and it holds back only
// the tail that is still a proper prefix of some stop string (the depth of
// the automaton's state), so text that cannot become part of a stop string
// is released at once (vLLM instead holds back a fixed max(len(stop))-1
// characters).
//
// Matching is defined on the whole text, independent of how it is split into
// deltas: the match is the stop-string occurrence that ends earliest; when
// several stop strings end at the same position, the one listed first wins.
// With includeStop false the output ends where the match starts; with
// includeStop true it ends where the match ends.
//
// min_tokens is the caller's business: do not feed the text of the first
// min_tokens tokens to Add if stop strings must not match there (or call
// Pass for it).
//
// Building the automaton costs time and memory linear in the total length
// of the stop strings; the API frontend caps their count and total length
// (--max-stop-strings, --max-stop-str-bytes) before it gets here.
//
// A Matcher is not safe for concurrent use; use one per completion.
package stopstr

// Matcher holds the stop-string state of one streamed completion.
type Matcher struct {
	ac      *automaton
	include bool
	// state is the automaton state after all text searched so far (0, the
	// root, after Pass or at the start).
	state int32
	// win is, with include false, the held-back text: the last depth(state)
	// bytes, a proper prefix of some stop string, not yet emitted. Unused
	// with include true (the state carries all the context needed).
	win     []byte
	stopped bool
	matched string
}

// Set is a compiled list of stop strings: immutable, safe for concurrent
// use, and shared by the Matchers of a request's choices (n 64 choices
// need one automaton, not 64).
type Set struct{ ac *automaton }

// Compile compiles stops (empty stop strings are ignored).
func Compile(stops []string) *Set { return &Set{ac: build(stops)} }

// New returns a Matcher for stops. Empty stop strings are ignored. With
// includeStop the emitted text runs through the matched stop string
// (include_stop_str_in_output); otherwise it ends just before it.
func New(stops []string, includeStop bool) *Matcher {
	return Compile(stops).Matcher(includeStop)
}

// Matcher returns a new Matcher over the set (see New).
func (s *Set) Matcher(includeStop bool) *Matcher {
	m := &Matcher{include: includeStop, ac: s.ac}
	if m.ac != nil && !includeStop {
		m.win = make([]byte, 0, m.ac.maxLen+64)
	}
	return m
}

// Stopped reports whether a stop string has matched, and which.
func (m *Matcher) Stopped() (bool, string) { return m.stopped, m.matched }

// Add appends text, the next delta of the completion. It returns the text
// that can be released now; stopped reports that a stop string matched in
// this or an earlier call, and matched is that stop string. Once stopped,
// Add returns "" with stopped true and the same matched string. The returned
// emit is a substring of text whenever nothing was held back before, so the
// common case allocates nothing.
func (m *Matcher) Add(text string) (emit string, stopped bool, matched string) {
	if m.stopped {
		return "", true, m.matched
	}
	if m.ac == nil || text == "" {
		return text, false, ""
	}
	ac := m.ac
	s := m.state
	for i := 0; i < len(text); i++ {
		s = ac.step(s, text[i])
		if idx := ac.out[s]; idx >= 0 {
			m.state = 0
			if m.include {
				return m.stop(text[:i+1], idx)
			}
			// The match starts at start, counted in held + text.
			start := len(m.win) + i + 1 - len(ac.stops[idx])
			var out string
			if start >= len(m.win) {
				out = prefixWith(m.win, text[:start-len(m.win)])
			} else {
				out = string(m.win[:start])
			}
			m.win = m.win[:0]
			return m.stop(out, idx)
		}
	}
	m.state = s
	if m.include {
		return text, false, ""
	}
	// Hold back the last depth(s) bytes of held + text.
	h := int(ac.depth[s])
	total := len(m.win) + len(text)
	n := total - h // bytes to release
	switch {
	case n <= 0:
		m.win = append(m.win, text...)
		return "", false, ""
	case n <= len(m.win):
		out := string(m.win[:n])
		rest := copy(m.win, m.win[n:])
		m.win = append(m.win[:rest], text...)
		return out, false, ""
	default:
		out := prefixWith(m.win, text[:n-len(m.win)])
		m.win = append(m.win[:0], text[n-len(m.win):]...)
		return out, false, ""
	}
}

// prefixWith returns held + s, which is s itself (no allocation) when
// nothing is held.
func prefixWith(held []byte, s string) string {
	if len(held) == 0 {
		return s
	}
	return string(held) + s
}

func (m *Matcher) stop(out string, idx int32) (string, bool, string) {
	m.stopped = true
	m.matched = m.ac.stops[idx]
	return out, true, m.matched
}

// Pass appends text that must not be searched (for example the text of the
// first min_tokens tokens) and returns what can be released: any held-back
// text followed by text. Stop strings never match inside passed text, nor
// across its ends.
func (m *Matcher) Pass(text string) string {
	if m.stopped {
		return ""
	}
	m.state = 0
	if len(m.win) == 0 {
		return text
	}
	out := string(m.win) + text
	m.win = m.win[:0]
	return out
}

// Flush returns the held-back text at the end of generation (nothing once
// stopped) and clears it.
func (m *Matcher) Flush() string {
	m.state = 0
	if m.stopped || len(m.win) == 0 {
		return ""
	}
	out := string(m.win)
	m.win = m.win[:0]
	return out
}

// Apply is the non-streamed form: it returns text cut at the earliest stop
// string (through it with includeStop) and the stop string that matched, or
// text unchanged and "" when none occurs.
func Apply(text string, stops []string, includeStop bool) (out string, matched string) {
	ac := build(stops)
	if ac == nil {
		return text, ""
	}
	var s int32
	for i := 0; i < len(text); i++ {
		s = ac.step(s, text[i])
		if idx := ac.out[s]; idx >= 0 {
			stop := ac.stops[idx]
			if includeStop {
				return text[:i+1], stop
			}
			return text[:i+1-len(stop)], stop
		}
	}
	return text, ""
}
