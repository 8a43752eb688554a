// Package tagscan holds the byte-level helpers the streaming parsers
// (reasoning, toolparse) share: how much of a buffer's tail may still grow
// into a tag, and which bytes count as JSON/markup whitespace. It imports
// nothing of the project.
package tagscan

// PartialSuffix returns the length of the longest suffix of s that is a
// proper prefix of one of tags: the bytes a streaming parser must hold back
// because the next token may complete a tag. Empty tags are ignored.
func PartialSuffix(s []byte, tags ...string) int {
	best := 0
	for _, t := range tags {
		if t == "" {
			continue
		}
		// Only a suffix starting with t[0] can be a prefix of t; the
		// first such position is the longest candidate.
		for i := len(s) - min(len(t)-1, len(s)); i < len(s)-best; i++ {
			if s[i] == t[0] && string(s[i:]) == t[:len(s)-i] {
				best = len(s) - i
				break
			}
		}
	}
	return best
}

// IsSpace reports whether c is JSON whitespace (space, newline, tab,
// carriage return).
func IsSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }
