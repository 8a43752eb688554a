package chattemplate

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// gonja v2.9.1 parses an inline if ("A if C else B") only at the top level
// of an output or set statement; inside parentheses, brackets or call
// arguments, as in ('b' if x else 'c'), it fails with "Unbalanced
// parenthesis". rewriteInlineIfs rewrites every such nested conditional in
// the template source, before parsing, into the equivalent
//
//	((C) and [A] or [B])|first
//
// which gonja parses and which evaluates lazily like the original: "and"
// and "or" return their operands and short-circuit, and a one-element list
// is always true. A missing else becomes [none].

var endRawRe = regexp.MustCompile(`\{%[-+]?\s*endraw\s*[-+]?%\}`)
var rawStartRe = regexp.MustCompile(`^[-+]?\s*raw\s*[-+]?$`)
var negIndexRe = regexp.MustCompile(`^\s*-\s*[0-9]+\s*$`)
var kwargPrefixRe = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_]*\s*=[^=]`)

// rewriteInlineIfs returns source with nested inline ifs rewritten; text
// outside {{ }} and {% %} is untouched. (String literals are left as they
// are; see rewriteSource.)
func rewriteInlineIfs(source string) string {
	out, _, _ := rewriteSource(source, false)
	return out
}

// internPrefix starts the names of interned string literals.
const internPrefix = "__sluice_s"

// rewriteSource rewrites nested inline ifs and, with intern, also replaces
// every string literal that contains a backslash by a variable name whose
// value (returned in strs) is the literal decoded with Python's escape rules.
// gonja decodes such literals differently from Jinja (a backslash-newline
// stays, an escaped backslash before the closing quote ends nothing).
func rewriteSource(source string, intern bool) (string, map[string]string, error) {
	rw := &rewriter{intern: intern, strs: map[string]string{}, names: map[string]string{}}
	out := rw.source(source)
	return out, rw.strs, rw.err
}

type rewriter struct {
	intern bool
	strs   map[string]string // name -> decoded value
	names  map[string]string // decoded value -> name
	err    error
}

// literal returns what to write for the string literal lit (quotes
// included).
func (rw *rewriter) literal(lit string) string {
	if !rw.intern || !strings.Contains(lit, `\`) || len(lit) < 2 {
		return lit
	}
	val, err := pyUnescape(strings.ReplaceAll(lit[1:len(lit)-1], "\r\n", "\n"))
	if err != nil {
		if rw.err == nil {
			rw.err = fmt.Errorf("string literal %s: %w", lit, err)
		}
		return lit
	}
	if name, ok := rw.names[val]; ok {
		return name
	}
	name := fmt.Sprintf("%s%d", internPrefix, len(rw.strs))
	rw.strs[name] = val
	rw.names[val] = name
	return name
}

func (rw *rewriter) source(source string) string {
	var out strings.Builder
	i := 0
	for i < len(source) {
		j := strings.IndexByte(source[i:], '{')
		if j < 0 || i+j+1 >= len(source) {
			out.WriteString(source[i:])
			break
		}
		j += i
		out.WriteString(source[i:j])
		switch source[j+1] {
		case '#':
			end := strings.Index(source[j+2:], "#}")
			if end < 0 {
				out.WriteString(source[j:])
				return out.String()
			}
			end += j + 2 + 2
			out.WriteString(source[j:end])
			i = end
		case '{', '%':
			closer := "}}"
			if source[j+1] == '%' {
				closer = "%}"
			}
			end := findTagEnd(source, j+2, closer)
			if end < 0 {
				out.WriteString(source[j:])
				return out.String()
			}
			inner := source[j+2 : end]
			if closer == "%}" && rawStartRe.MatchString(inner) {
				loc := endRawRe.FindStringIndex(source[end:])
				if loc == nil {
					out.WriteString(source[j:])
					return out.String()
				}
				stop := end + loc[1]
				out.WriteString(source[j:stop])
				i = stop
				continue
			}
			out.WriteString(source[j : j+2])
			out.WriteString(rw.expr(inner))
			out.WriteString(closer)
			i = end + 2
		default:
			out.WriteByte('{')
			i = j + 1
		}
	}
	return out.String()
}

// findTagEnd returns the index of closer in s at or after from, skipping
// string literals, or -1.
func findTagEnd(s string, from int, closer string) int {
	for i := from; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'', '"':
			i = skipString(s, i)
		default:
			if strings.HasPrefix(s[i:], closer) {
				return i
			}
		}
	}
	return -1
}

// skipString returns the index of the closing quote of the string literal
// starting at s[i] (or len(s)-1 if unterminated).
func skipString(s string, i int) int {
	q := s[i]
	for k := i + 1; k < len(s); k++ {
		switch s[k] {
		case '\\':
			k++
		case q:
			return k
		}
	}
	return len(s) - 1
}

// matchClose returns the index of the bracket closing the one at s[i].
func matchClose(s string, i int) int {
	depth := 0
	for k := i; k < len(s); k++ {
		switch s[k] {
		case '\'', '"':
			k = skipString(s, k)
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
			if depth == 0 {
				return k
			}
		}
	}
	return -1
}

// expr rewrites the bracket groups and string literals inside expression
// text s.
func (rw *rewriter) expr(s string) string {
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\'', '"':
			end := skipString(s, i)
			out.WriteString(rw.literal(s[i : end+1]))
			i = end
		case '(', '[', '{':
			end := matchClose(s, i)
			if end < 0 {
				out.WriteString(s[i:])
				return out.String()
			}
			inner := rw.expr(s[i+1 : end])
			if c == '[' && isSubscript(s[:i]) && negIndexRe.MatchString(inner) {
				// gonja misses x[-n] when len(x) == n; x[-n:][0] is the same
				// element whenever x[-n] exists.
				out.WriteString("[" + inner + ":][0]")
				i = end
				continue
			}
			if c != '{' {
				inner = rewriteElements(inner)
			}
			out.WriteByte(c)
			out.WriteString(inner)
			out.WriteByte(s[end])
			i = end
		default:
			out.WriteByte(c)
		}
	}
	return out.String()
}

// isSubscript reports whether a '[' following before is a subscript (it
// follows a name, a closing bracket or a string) rather than a list literal.
func isSubscript(before string) bool {
	before = strings.TrimRight(before, " \t\n")
	if before == "" {
		return false
	}
	c := before[len(before)-1]
	if c == ')' || c == ']' || c == '\'' || c == '"' {
		return true
	}
	if !isIdentByte(c) {
		return false
	}
	// A keyword such as "in" or "and" before '[' starts a list literal.
	i := len(before)
	for i > 0 && isIdentByte(before[i-1]) {
		i--
	}
	switch before[i:] {
	case "in", "and", "or", "not", "if", "else", "is":
		return false
	}
	return true
}

// splitTop splits s at top-level occurrences of sep (outside strings and
// brackets).
func splitTop(s string, sep byte) []string {
	var parts []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\'', '"':
			i = skipString(s, i)
		case '(', '[', '{':
			if e := matchClose(s, i); e > 0 {
				i = e
			}
		case sep:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// findKeyword returns the index of the top-level keyword kw in s, or -1.
func findKeyword(s, kw string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\'', '"':
			i = skipString(s, i)
		case '(', '[', '{':
			if e := matchClose(s, i); e > 0 {
				i = e
			}
		default:
			if strings.HasPrefix(s[i:], kw) &&
				(i == 0 || !isIdentByte(s[i-1]) && s[i-1] != '.') &&
				(i+len(kw) == len(s) || !isIdentByte(s[i+len(kw)])) {
				return i
			}
		}
	}
	return -1
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// rewriteElements rewrites each comma-separated element of a group's
// contents that is an inline if.
func rewriteElements(s string) string {
	parts := splitTop(s, ',')
	changed := false
	for i, p := range parts {
		if r, ok := rewriteConditional(p); ok {
			parts[i] = r
			changed = true
		}
	}
	if !changed {
		return s
	}
	return strings.Join(parts, ",")
}

// rewriteConditional rewrites one element "A if C else B" (optionally
// "name=A if C else B", a keyword argument).
func rewriteConditional(e string) (string, bool) {
	if len(splitTop(e, ':')) > 1 {
		return "", false // a slice or a dict pair: leave it
	}
	prefix := ""
	if loc := kwargPrefixRe.FindStringIndex(e); loc != nil {
		prefix, e = e[:loc[1]-1], e[loc[1]-1:]
	}
	i := findKeyword(e, "if")
	if i < 0 || strings.TrimSpace(e[:i]) == "" {
		return "", false
	}
	a, rest := e[:i], e[i+2:]
	c, b := rest, "none"
	if j := findKeyword(rest, "else"); j >= 0 {
		c = rest[:j]
		b = rest[j+4:]
		if r, ok := rewriteConditional(b); ok {
			b = r
		}
	}
	if strings.TrimSpace(c) == "" || strings.TrimSpace(b) == "" {
		return "", false
	}
	return prefix + "((" + c + ") and [" + a + "] or [" + b + "])|first", true
}

// pyUnescape decodes the body of a Jinja string literal as Python's
// "unicode-escape" codec does (which is what Jinja's lexer uses): the
// one-letter escapes, octal, x/u/U hex escapes; a backslash-newline is
// removed, and an unknown escape is kept as written.
func pyUnescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch n := s[i]; n {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(n)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			v, _ := strconv.ParseUint(s[i:j], 8, 32)
			b.WriteRune(validRune(rune(v)))
			i = j - 1
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[n]
			if i+1+width > len(s) {
				return "", fmt.Errorf("truncated \\%c escape", n)
			}
			v, err := strconv.ParseUint(s[i+1:i+1+width], 16, 32)
			if err != nil {
				return "", fmt.Errorf("bad \\%c escape", n)
			}
			if v > utf8.MaxRune {
				return "", fmt.Errorf("\\%c escape out of range", n)
			}
			b.WriteRune(validRune(rune(v)))
			i += width
		default:
			b.WriteByte('\\')
			b.WriteByte(n)
		}
	}
	return b.String(), nil
}

// validRune maps surrogates (which Go strings cannot hold) to U+FFFD.
func validRune(r rune) rune {
	if !utf8.ValidRune(r) {
		return utf8.RuneError
	}
	return r
}
