// Package stopstr finds stop strings in streamed text.
//
// A Matcher is fed the text deltas of one completion as the incremental
// detokenizer produces them. Each Add searches only the new text plus a
// small overlap with what came before, and holds back only the tail that is
// still a proper prefix of some stop string, so text that cannot become part
// of a stop string is released at once (vLLM instead holds back a fixed
// max(len(stop))-1 characters).
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
// A Matcher is not safe for concurrent use; use one per completion.
package stopstr

import (
	"bytes"
	"strings"
)

// Matcher holds the stop-string state of one streamed completion.
type Matcher struct {
	stops   []string
	stopB   [][]byte
	include bool
	// maxLen is the longest stop string's length in bytes.
	maxLen int
	// win is, with include false, the held-back text (a proper prefix of
	// some stop string, not yet emitted); with include true, the last
	// maxLen-1 bytes already emitted, kept as search overlap.
	win     []byte
	stopped bool
	matched string
}

// New returns a Matcher for stops. Empty stop strings are ignored. With
// includeStop the emitted text runs through the matched stop string
// (include_stop_str_in_output); otherwise it ends just before it.
func New(stops []string, includeStop bool) *Matcher {
	m := &Matcher{include: includeStop}
	for _, s := range stops {
		if s == "" {
			continue
		}
		m.stops = append(m.stops, s)
		m.stopB = append(m.stopB, []byte(s))
		m.maxLen = max(m.maxLen, len(s))
	}
	if m.maxLen > 0 {
		m.win = make([]byte, 0, 2*m.maxLen+64)
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
	if len(m.stops) == 0 || text == "" {
		return text, false, ""
	}
	if m.include {
		return m.addInclude(text)
	}
	if len(m.win) == 0 {
		// Nothing held: search text in place.
		if start, _, idx := m.earliestString(text); idx >= 0 {
			return m.stop(text[:start], idx)
		}
		h := holdLenString(m.stops, text)
		m.win = append(m.win[:0], text[len(text)-h:]...)
		return text[:len(text)-h], false, ""
	}
	m.win = append(m.win, text...)
	if start, _, idx := m.earliestBytes(m.win, 0); idx >= 0 {
		out := string(m.win[:start])
		m.win = m.win[:0]
		return m.stop(out, idx)
	}
	h := holdLenBytes(m.stops, m.win)
	n := len(m.win) - h
	if n == 0 {
		return "", false, ""
	}
	out := string(m.win[:n])
	m.win = m.win[:copy(m.win, m.win[n:])]
	return out, false, ""
}

// addInclude handles includeStop: nothing is held back; win keeps the last
// maxLen-1 emitted bytes so a stop string spanning deltas is still found.
func (m *Matcher) addInclude(text string) (string, bool, string) {
	old := len(m.win)
	m.win = append(m.win, text...)
	if _, end, idx := m.earliestBytes(m.win, old); idx >= 0 {
		m.win = m.win[:0]
		return m.stop(text[:end-old], idx)
	}
	if keep := m.maxLen - 1; len(m.win) > keep {
		m.win = m.win[:copy(m.win, m.win[len(m.win)-keep:])]
	}
	return text, false, ""
}

func (m *Matcher) stop(out string, idx int) (string, bool, string) {
	m.stopped = true
	m.matched = m.stops[idx]
	return out, true, m.matched
}

// Pass appends text that must not be searched (for example the text of the
// first min_tokens tokens) and returns what can be released: any held-back
// text followed by text. Stop strings never match inside passed text.
func (m *Matcher) Pass(text string) string {
	if m.stopped {
		return ""
	}
	if m.include {
		m.win = m.win[:0]
		return text
	}
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
	if m.stopped || m.include || len(m.win) == 0 {
		if m.include {
			m.win = m.win[:0]
		}
		return ""
	}
	out := string(m.win)
	m.win = m.win[:0]
	return out
}

// earliestString finds the stop occurrence in s ending earliest (ties: the
// stop listed first). idx is -1 when none occurs.
func (m *Matcher) earliestString(s string) (start, end, idx int) {
	idx = -1
	for i, stop := range m.stops {
		j := strings.Index(s, stop)
		if j < 0 {
			continue
		}
		if e := j + len(stop); idx < 0 || e < end {
			start, end, idx = j, e, i
		}
	}
	return start, end, idx
}

// earliestBytes is earliestString over b, considering only occurrences that
// end after from.
func (m *Matcher) earliestBytes(b []byte, from int) (start, end, idx int) {
	idx = -1
	for i, stop := range m.stopB {
		lo := max(0, from-len(stop)+1)
		j := bytes.Index(b[lo:], stop)
		if j < 0 {
			continue
		}
		j += lo
		if e := j + len(stop); idx < 0 || e < end {
			start, end, idx = j, e, i
		}
	}
	return start, end, idx
}

// holdLenString returns the length of the longest suffix of s that is a
// proper prefix of some stop string.
func holdLenString(stops []string, s string) int {
	best := 0
	for _, stop := range stops {
		for k := min(len(stop)-1, len(s)); k > best; k-- {
			if s[len(s)-k:] == stop[:k] {
				best = k
				break
			}
		}
	}
	return best
}

// holdLenBytes is holdLenString over b (the comparison does not allocate).
func holdLenBytes(stops []string, b []byte) int {
	best := 0
	for _, stop := range stops {
		for k := min(len(stop)-1, len(b)); k > best; k-- {
			if string(b[len(b)-k:]) == stop[:k] {
				best = k
				break
			}
		}
	}
	return best
}

// Apply is the non-streamed form: it returns text cut at the earliest stop
// string (through it with includeStop) and the stop string that matched, or
// text unchanged and "" when none occurs.
func Apply(text string, stops []string, includeStop bool) (out string, matched string) {
	m := New(stops, includeStop)
	start, end, idx := m.earliestString(text)
	if idx < 0 {
		return text, ""
	}
	if includeStop {
		return text[:end], m.stops[idx]
	}
	return text[:start], m.stops[idx]
}
