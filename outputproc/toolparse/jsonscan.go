package toolparse

import "github.com/sluice-llm/sluice/outputproc/tagscan"

// jsonScanner is a resumable, strict JSON scanner: fed a value's bytes in
// pieces, it finds where the value ends or where it stops being JSON. It
// keeps only a container stack and a small state, so scanning is O(bytes).
type jsonScanner struct {
	stack []byte // open containers, '{' or '['
	st    uint8
	lit   string // the rest of a true/false/null literal
	hex   uint8  // hex digits left in a \u escape
	key   bool   // the string being scanned is an object key
}

// Scanner states.
const (
	jsValue    = iota // expect a value
	jsArrFirst        // after '[': a value or ']'
	jsObjFirst        // after '{': a key or '}'
	jsObjKey          // after ',' in an object: a key
	jsColon           // after a key
	jsAfter           // after a value in a container: ',' or the close
	jsStr
	jsEsc
	jsHex
	jsLit
	jsNumMinus
	jsNum0
	jsNumInt
	jsNumDot
	jsNumFrac
	jsNumE
	jsNumESign
	jsNumExp
)

// Results of feed.
const (
	scanMore = iota // all bytes belong to the value, which is not complete
	scanDone        // the value ended after n bytes
	scanErr         // byte n cannot continue the value
)

func (s *jsonScanner) reset() {
	s.stack = s.stack[:0]
	s.st = jsValue
	s.key = false
}

// feed scans b, which continues the value, and returns how many bytes were
// consumed and whether the value is complete, broken, or needs more.
func (s *jsonScanner) feed(b []byte) (n int, res int) {
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch s.st {
		case jsValue, jsArrFirst:
			if tagscan.IsSpace(c) {
				continue
			}
			if c == ']' && s.st == jsArrFirst {
				if s.close() {
					return i + 1, scanDone
				}
				continue
			}
			switch {
			case c == '{':
				s.stack = append(s.stack, '{')
				s.st = jsObjFirst
			case c == '[':
				s.stack = append(s.stack, '[')
				s.st = jsArrFirst
			case c == '"':
				s.st, s.key = jsStr, false
			case c == '-':
				s.st = jsNumMinus
			case c == '0':
				s.st = jsNum0
			case c >= '1' && c <= '9':
				s.st = jsNumInt
			case c == 't':
				s.st, s.lit = jsLit, "rue"
			case c == 'f':
				s.st, s.lit = jsLit, "alse"
			case c == 'n':
				s.st, s.lit = jsLit, "ull"
			default:
				return i, scanErr
			}
		case jsObjFirst, jsObjKey:
			switch {
			case tagscan.IsSpace(c):
			case c == '"':
				s.st, s.key = jsStr, true
			case c == '}' && s.st == jsObjFirst:
				if s.close() {
					return i + 1, scanDone
				}
			default:
				return i, scanErr
			}
		case jsColon:
			switch {
			case tagscan.IsSpace(c):
			case c == ':':
				s.st = jsValue
			default:
				return i, scanErr
			}
		case jsAfter:
			top := s.stack[len(s.stack)-1]
			switch {
			case tagscan.IsSpace(c):
			case c == ',':
				if top == '{' {
					s.st = jsObjKey
				} else {
					s.st = jsValue
				}
			case c == '}' && top == '{', c == ']' && top == '[':
				if s.close() {
					return i + 1, scanDone
				}
			default:
				return i, scanErr
			}
		case jsStr:
			switch {
			case c == '"':
				if s.key {
					s.st = jsColon
				} else if s.endValue() {
					return i + 1, scanDone
				}
			case c == '\\':
				s.st = jsEsc
			case c < 0x20:
				return i, scanErr
			}
		case jsEsc:
			switch c {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.st = jsStr
			case 'u':
				s.st, s.hex = jsHex, 4
			default:
				return i, scanErr
			}
		case jsHex:
			if !isHex(c) {
				return i, scanErr
			}
			if s.hex--; s.hex == 0 {
				s.st = jsStr
			}
		case jsLit:
			if c != s.lit[0] {
				return i, scanErr
			}
			if s.lit = s.lit[1:]; s.lit == "" && s.endValue() {
				return i + 1, scanDone
			}
		case jsNumMinus:
			switch {
			case c == '0':
				s.st = jsNum0
			case c >= '1' && c <= '9':
				s.st = jsNumInt
			default:
				return i, scanErr
			}
		case jsNum0, jsNumInt, jsNumFrac, jsNumExp:
			switch {
			case c >= '0' && c <= '9' && s.st != jsNum0:
			case c == '.' && (s.st == jsNum0 || s.st == jsNumInt):
				s.st = jsNumDot
			case (c == 'e' || c == 'E') && s.st != jsNumExp:
				s.st = jsNumE
			default:
				// The number ended just before c.
				if len(s.stack) == 0 {
					return i, scanDone
				}
				s.st = jsAfter
				i-- // c belongs to the container
			}
		case jsNumDot:
			if c < '0' || c > '9' {
				return i, scanErr
			}
			s.st = jsNumFrac
		case jsNumE:
			switch {
			case c == '+' || c == '-':
				s.st = jsNumESign
			case c >= '0' && c <= '9':
				s.st = jsNumExp
			default:
				return i, scanErr
			}
		case jsNumESign:
			if c < '0' || c > '9' {
				return i, scanErr
			}
			s.st = jsNumExp
		}
	}
	return len(b), scanMore
}

// complete reports whether the bytes so far, with nothing more to come,
// form a whole value (only a bare top-level number can end without a
// following byte).
func (s *jsonScanner) complete() bool {
	if len(s.stack) != 0 {
		return false
	}
	switch s.st {
	case jsNum0, jsNumInt, jsNumFrac, jsNumExp:
		return true
	}
	return false
}

// endValue records the end of a scalar; true when it was the whole value.
func (s *jsonScanner) endValue() bool {
	if len(s.stack) == 0 {
		return true
	}
	s.st = jsAfter
	return false
}

// close pops a container; true when it closed the whole value.
func (s *jsonScanner) close() bool {
	s.stack = s.stack[:len(s.stack)-1]
	return s.endValue()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
