package toolparse

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluice-llm/sluice/outputproc/tagscan"
)

// pyToJSON converts one Python literal (str, int, float, True/False/None,
// list, tuple, dict) to compact JSON; false when s is not exactly one such
// literal.
func pyToJSON(s []byte) ([]byte, bool) {
	p := pyLit{s: s}
	out, ok := p.value(nil, 0)
	if !ok {
		return nil, false
	}
	p.ws()
	return out, p.i == len(p.s)
}

// pyLit is a cursor over a Python literal.
type pyLit struct {
	s []byte
	i int
}

const maxPyDepth = 64

func (p *pyLit) ws() {
	for p.i < len(p.s) && tagscan.IsSpace(p.s[p.i]) {
		p.i++
	}
}

func (p *pyLit) value(dst []byte, depth int) ([]byte, bool) {
	p.ws()
	if p.i >= len(p.s) || depth > maxPyDepth {
		return dst, false
	}
	switch c := p.s[p.i]; {
	case c == '\'' || c == '"':
		return p.str(dst)
	case c == '[' || c == '(':
		closer := byte(']')
		if c == '(' {
			closer = ')'
		}
		p.i++
		dst = append(dst, '[')
		return p.seq(dst, closer, depth, false)
	case c == '{':
		p.i++
		dst = append(dst, '{')
		return p.seq(dst, '}', depth, true)
	case c == '-' || c == '+' || c == '.' || c >= '0' && c <= '9':
		return p.num(dst)
	default:
		j := p.i
		for j < len(p.s) && (isIdent(p.s[j])) {
			j++
		}
		word := string(p.s[p.i:j])
		p.i = j
		switch word {
		case "True":
			return append(dst, "true"...), true
		case "False":
			return append(dst, "false"...), true
		case "None":
			return append(dst, "null"...), true
		}
		return dst, false
	}
}

// seq reads list/tuple items or dict entries up to closer (trailing comma
// allowed).
func (p *pyLit) seq(dst []byte, closer byte, depth int, dict bool) ([]byte, bool) {
	end := byte(']')
	if dict {
		end = '}'
	}
	first := true
	for {
		p.ws()
		if p.i >= len(p.s) {
			return dst, false
		}
		if p.s[p.i] == closer {
			p.i++
			return append(dst, end), true
		}
		if !first {
			if p.s[p.i] != ',' {
				return dst, false
			}
			p.i++
			p.ws()
			if p.i < len(p.s) && p.s[p.i] == closer {
				p.i++
				return append(dst, end), true
			}
			dst = append(dst, ',')
		}
		first = false
		var ok bool
		if dict {
			p.ws()
			if p.i >= len(p.s) {
				return dst, false
			}
			if c := p.s[p.i]; c == '\'' || c == '"' {
				dst, ok = p.str(dst)
			} else {
				// Non-string keys become strings, as json.dumps does.
				var k []byte
				k, ok = p.value(nil, depth+1)
				if ok && (len(k) == 0 || k[0] == '[' || k[0] == '{') {
					ok = false
				}
				dst = append(append(append(dst, '"'), k...), '"')
			}
			if !ok {
				return dst, false
			}
			p.ws()
			if p.i >= len(p.s) || p.s[p.i] != ':' {
				return dst, false
			}
			p.i++
			dst = append(dst, ':')
		}
		if dst, ok = p.value(dst, depth+1); !ok {
			return dst, false
		}
	}
}

// str reads a quoted string (single, double or triple quotes) and writes it
// as a JSON string.
func (p *pyLit) str(dst []byte) ([]byte, bool) {
	q := p.s[p.i]
	triple := p.i+2 < len(p.s) && p.s[p.i+1] == q && p.s[p.i+2] == q
	if triple {
		p.i += 3
	} else {
		p.i++
	}
	var val []byte
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == q && !triple:
			p.i++
			return appendQuoted(dst, val), true
		case c == q && triple && p.i+2 < len(p.s) && p.s[p.i+1] == q && p.s[p.i+2] == q:
			p.i += 3
			return appendQuoted(dst, val), true
		case c == '\n' && !triple:
			return dst, false
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return dst, false
			}
			var ok bool
			if val, ok = p.escape(val); !ok {
				return dst, false
			}
		default:
			val = append(val, c)
			p.i++
		}
	}
	return dst, false
}

// escape decodes the escape sequence at the cursor.
func (p *pyLit) escape(val []byte) ([]byte, bool) {
	e := p.s[p.i+1]
	p.i += 2
	n := 0
	switch e {
	case 'n':
		return append(val, '\n'), true
	case 't':
		return append(val, '\t'), true
	case 'r':
		return append(val, '\r'), true
	case '\\', '\'', '"':
		return append(val, e), true
	case '0':
		return append(val, 0), true
	case 'a':
		return append(val, 7), true
	case 'b':
		return append(val, 8), true
	case 'f':
		return append(val, 12), true
	case 'v':
		return append(val, 11), true
	case '\n':
		return val, true
	case 'x':
		n = 2
	case 'u':
		n = 4
	case 'U':
		n = 8
	default:
		return append(val, '\\', e), true
	}
	if p.i+n > len(p.s) {
		return val, false
	}
	r, err := strconv.ParseUint(string(p.s[p.i:p.i+n]), 16, 32)
	if err != nil || !utf8.ValidRune(rune(r)) {
		return val, false
	}
	p.i += n
	return utf8.AppendRune(val, rune(r)), true
}

func appendQuoted(dst, val []byte) []byte {
	dst = append(dst, '"')
	dst = escapeJSON(dst, val)
	return append(dst, '"')
}

// num reads an int or float literal.
func (p *pyLit) num(dst []byte) ([]byte, bool) {
	j := p.i
	for j < len(p.s) && (isIdent(p.s[j]) || p.s[j] == '.' || p.s[j] == '-' || p.s[j] == '+') {
		if (p.s[j] == '-' || p.s[j] == '+') && j > p.i && p.s[j-1] != 'e' && p.s[j-1] != 'E' {
			break
		}
		j++
	}
	lit := strings.ReplaceAll(string(p.s[p.i:j]), "_", "")
	p.i = j
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return strconv.AppendInt(dst, n, 10), true
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || strings.ContainsAny(lit, "xXnN") {
		return dst, false
	}
	if f == float64(int64(f)) && !strings.ContainsAny(lit, ".eE") {
		return strconv.AppendInt(dst, int64(f), 10), true
	}
	out := strconv.AppendFloat(dst, f, 'g', -1, 64)
	if !strings.ContainsAny(string(out[len(dst):]), ".eE") {
		out = append(out, '.', '0')
	}
	return out, true
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
