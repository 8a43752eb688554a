package stream

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Chunk is what the benchmark needs from one streamed JSON object.
type Chunk struct {
	// Choices is the number of elements of "choices" (0 when absent or
	// null). vLLM's client times a token event on Choices > 0.
	Choices int
	// HasUsage reports a "usage" object; PromptTokens and CompletionTokens
	// are its counts (-1 where the field is absent).
	HasUsage         bool
	PromptTokens     int
	CompletionTokens int
	// IsError reports an error delivered inside the stream: a top-level
	// "error" member, or {"object":"error","message":…}. ErrorMessage is its
	// message.
	IsError      bool
	ErrorMessage string
}

// ErrSyntax is returned (wrapped) by Parser.Parse for malformed JSON.
var ErrSyntax = errors.New("stream: malformed JSON chunk")

// maxDepth bounds nesting inside skipped values.
const maxDepth = 512

// Parser scans streamed chunks. It keeps scratch space between calls, so a
// Parser must not be used by two goroutines at once; reusing one avoids
// allocation.
type Parser struct {
	key []byte // unescaped object key
	tmp []byte // unescaped string value
}

// Parse scans one chunk (the data of an SSE event) into c and appends the
// text the first choice carries — "text" for completions, delta "content",
// "reasoning" and "reasoning_content" for chat — to text, returning the
// extended slice. Unknown members are skipped. Malformed input returns an
// error wrapping ErrSyntax, never a panic.
func (p *Parser) Parse(data []byte, c *Chunk, text []byte) ([]byte, error) {
	*c = Chunk{PromptTokens: -1, CompletionTokens: -1}
	s := scanner{b: data}
	isErrorObject := false
	var topMessage []byte
	err := s.object(&p.key, func(key []byte) error {
		switch string(key) {
		case "choices":
			n, t, err := p.choices(&s, text)
			c.Choices, text = n, t
			return err
		case "usage":
			return p.usage(&s, c)
		case "error":
			c.IsError = true
			msg, err := p.errorValue(&s)
			c.ErrorMessage = msg
			return err
		case "object":
			v, isStr, err := p.stringOrSkip(&s)
			isErrorObject = isStr && string(v) == "error"
			return err
		case "message":
			v, isStr, err := p.stringOrSkip(&s)
			if isStr {
				topMessage = append(topMessage[:0], v...)
			}
			return err
		}
		return s.skip()
	})
	if err != nil {
		return text, err
	}
	s.ws()
	if s.i != len(s.b) {
		return text, s.errf("trailing data")
	}
	if isErrorObject && !c.IsError {
		c.IsError = true
		c.ErrorMessage = validText(topMessage)
	}
	return text, nil
}

// choices scans the "choices" array, appending the first element's text.
func (p *Parser) choices(s *scanner, text []byte) (int, []byte, error) {
	s.ws()
	if s.peek() != '[' {
		return 0, text, s.skip()
	}
	n := 0
	err := s.array(func() error {
		n++
		if n > 1 {
			return s.skip()
		}
		s.ws()
		if s.peek() != '{' {
			return s.skip()
		}
		return s.object(&p.key, func(key []byte) error {
			switch string(key) {
			case "text":
				return p.appendString(s, &text)
			case "delta", "message":
				s.ws()
				if s.peek() != '{' {
					return s.skip()
				}
				return s.object(&p.key, func(key []byte) error {
					switch string(key) {
					case "content", "reasoning", "reasoning_content":
						return p.appendString(s, &text)
					}
					return s.skip()
				})
			}
			return s.skip()
		})
	})
	return n, text, err
}

// appendString appends a string value to *dst; null and non-strings are
// skipped.
func (p *Parser) appendString(s *scanner, dst *[]byte) error {
	s.ws()
	if s.peek() != '"' {
		return s.skip()
	}
	out, err := s.str(*dst)
	*dst = out
	return err
}

// stringOrSkip returns a string value (in p.tmp) or skips a non-string one.
func (p *Parser) stringOrSkip(s *scanner) ([]byte, bool, error) {
	s.ws()
	if s.peek() != '"' {
		return nil, false, s.skip()
	}
	var err error
	p.tmp, err = s.str(p.tmp[:0])
	return p.tmp, true, err
}

// usage scans a "usage" object.
func (p *Parser) usage(s *scanner, c *Chunk) error {
	s.ws()
	if s.lit("null") {
		return nil
	}
	if s.peek() != '{' {
		return s.skip()
	}
	c.HasUsage = true
	return s.object(&p.key, func(key []byte) error {
		switch string(key) {
		case "prompt_tokens":
			return s.intInto(&c.PromptTokens)
		case "completion_tokens":
			return s.intInto(&c.CompletionTokens)
		}
		return s.skip()
	})
}

// errorValue returns the message of an "error" member: its "message" when
// an object, the string itself, or the raw JSON of anything else.
func (p *Parser) errorValue(s *scanner) (string, error) {
	s.ws()
	switch s.peek() {
	case '"':
		v, _, err := p.stringOrSkip(s)
		return validText(v), err
	case '{':
		msg, raw := "", s.i
		err := s.object(&p.key, func(key []byte) error {
			if string(key) == "message" {
				v, isStr, err := p.stringOrSkip(s)
				if isStr {
					msg = validText(v)
				}
				return err
			}
			return s.skip()
		})
		if msg == "" && err == nil {
			msg = string(s.b[raw:s.i])
		}
		return msg, err
	}
	raw := s.i
	err := s.skip()
	return string(s.b[raw:s.i]), err
}

// validText converts a decoded JSON string to Go text the way encoding/json
// does: each byte that is not part of valid UTF-8 becomes U+FFFD, so an
// error message reads the same as in any JSON client.
func validText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return string(out)
}

// scanner walks JSON text.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) errf(what string) error {
	return fmt.Errorf("%w: %s at offset %d", ErrSyntax, what, s.i)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next byte, 0 at the end.
func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// lit consumes the literal word if it comes next.
func (s *scanner) lit(word string) bool {
	if len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return true
	}
	return false
}

// object scans an object, calling member with each (unescaped) key with the
// scanner positioned after the colon; member must consume the value.
func (s *scanner) object(keyBuf *[]byte, member func(key []byte) error) error {
	s.ws()
	if s.peek() != '{' {
		return s.errf("expected object")
	}
	s.i++
	s.ws()
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		s.ws()
		if s.peek() != '"' {
			return s.errf("expected key")
		}
		k, err := s.str((*keyBuf)[:0])
		*keyBuf = k
		if err != nil {
			return err
		}
		s.ws()
		if s.peek() != ':' {
			return s.errf("expected colon")
		}
		s.i++
		if err := member(k); err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.errf("expected , or }")
		}
	}
}

// array scans an array, calling elem positioned at each element; elem must
// consume it.
func (s *scanner) array(elem func() error) error {
	s.ws()
	if s.peek() != '[' {
		return s.errf("expected array")
	}
	s.i++
	s.ws()
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return s.errf("expected , or ]")
		}
	}
}

// str appends the unescaped content of the string at s.i to dst.
func (s *scanner) str(dst []byte) ([]byte, error) {
	if s.peek() != '"' {
		return dst, s.errf("expected string")
	}
	s.i++
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			dst = append(dst, s.b[start:s.i]...)
			s.i++
			return dst, nil
		case c == '\\':
			dst = append(dst, s.b[start:s.i]...)
			var err error
			if dst, err = s.escape(dst); err != nil {
				return dst, err
			}
			start = s.i
		case c < 0x20:
			return dst, s.errf("control character in string")
		default:
			s.i++
		}
	}
	return dst, s.errf("unterminated string")
}

// escape decodes the escape sequence at s.i (a backslash) onto dst.
func (s *scanner) escape(dst []byte) ([]byte, error) {
	if s.i+1 >= len(s.b) {
		return dst, s.errf("truncated escape")
	}
	c := s.b[s.i+1]
	s.i += 2
	switch c {
	case '"', '\\', '/':
		return append(dst, c), nil
	case 'b':
		return append(dst, '\b'), nil
	case 'f':
		return append(dst, '\f'), nil
	case 'n':
		return append(dst, '\n'), nil
	case 'r':
		return append(dst, '\r'), nil
	case 't':
		return append(dst, '\t'), nil
	case 'u':
		r, ok := s.hex4()
		if !ok {
			return dst, s.errf("bad \\u escape")
		}
		if utf16.IsSurrogate(r) {
			r2 := rune(-1)
			if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
				save := s.i
				s.i += 2
				var ok2 bool
				if r2, ok2 = s.hex4(); !ok2 {
					return dst, s.errf("bad \\u escape")
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					return utf8.AppendRune(dst, d), nil
				}
				s.i = save // not a pair: the second escape stands alone
			}
			return utf8.AppendRune(dst, utf8.RuneError), nil
		}
		return utf8.AppendRune(dst, r), nil
	}
	return dst, s.errf("bad escape")
}

// hex4 reads four hex digits.
func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	s.i += 4
	return r, true
}

// number consumes a JSON number and returns its text.
func (s *scanner) number() ([]byte, error) {
	start := s.i
	if s.peek() == '-' {
		s.i++
	}
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.peek() == '0' {
		s.i++
	} else if digits() == 0 {
		return nil, s.errf("bad number")
	}
	if s.peek() == '.' {
		s.i++
		if digits() == 0 {
			return nil, s.errf("bad number")
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if digits() == 0 {
			return nil, s.errf("bad number")
		}
	}
	return s.b[start:s.i], nil
}

// intInto reads a number into *dst (truncated toward zero); null and other
// values are skipped, leaving *dst alone.
func (s *scanner) intInto(dst *int) error {
	s.ws()
	c := s.peek()
	if c != '-' && (c < '0' || c > '9') {
		return s.skip()
	}
	num, err := s.number()
	if err != nil {
		return err
	}
	n, ok := 0, true
	for _, d := range num {
		if d < '0' || d > '9' || n > (1<<53) {
			ok = false
			break
		}
		n = n*10 + int(d-'0')
	}
	if ok {
		*dst = n
		return nil
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || f != f || f > 1<<53 || f < -(1<<53) {
		return nil // out of range: leave the count unknown
	}
	*dst = int(f)
	return nil
}

// skip consumes one value of any kind without recursion.
func (s *scanner) skip() error {
	s.ws()
	depth := 0
	var stack [maxDepth]byte
	for {
		s.ws()
		switch c := s.peek(); {
		case c == '{' || c == '[':
			if depth == maxDepth {
				return s.errf("nesting too deep")
			}
			stack[depth] = c
			depth++
			s.i++
			s.ws()
			if (c == '{' && s.peek() == '}') || (c == '[' && s.peek() == ']') {
				s.i++
				depth--
				break
			}
			if c == '{' {
				if err := s.memberKey(); err != nil {
					return err
				}
			}
			continue
		case c == '"':
			if err := s.skipString(); err != nil {
				return err
			}
		case c == '-' || (c >= '0' && c <= '9'):
			if _, err := s.number(); err != nil {
				return err
			}
		case s.lit("true"), s.lit("false"), s.lit("null"):
		default:
			return s.errf("unexpected value")
		}
		// After a complete value: close containers or move to the next item.
		for {
			if depth == 0 {
				return nil
			}
			s.ws()
			open := stack[depth-1]
			c := s.peek()
			if c == ',' {
				s.i++
				if open == '{' {
					if err := s.memberKey(); err != nil {
						return err
					}
				}
				break
			}
			if (open == '{' && c == '}') || (open == '[' && c == ']') {
				s.i++
				depth--
				continue
			}
			return s.errf("expected , or closing bracket")
		}
	}
}

// memberKey consumes `"key" :` inside an object being skipped.
func (s *scanner) memberKey() error {
	s.ws()
	if s.peek() != '"' {
		return s.errf("expected key")
	}
	if err := s.skipString(); err != nil {
		return err
	}
	s.ws()
	if s.peek() != ':' {
		return s.errf("expected colon")
	}
	s.i++
	return nil
}

// skipString consumes a string, checking its escapes.
func (s *scanner) skipString() error {
	s.i++
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return nil
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return s.errf("truncated escape")
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				s.i += 2
				if _, ok := s.hex4(); !ok {
					return s.errf("bad \\u escape")
				}
			default:
				return s.errf("bad escape")
			}
		case c < 0x20:
			return s.errf("control character in string")
		default:
			s.i++
		}
	}
	return s.errf("unterminated string")
}
