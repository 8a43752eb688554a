package openai

import (
	"math"
	"strconv"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. Control characters, quotes and
// backslashes are escaped; invalid UTF-8 becomes U+FFFD, as encoding/json
// does. U+2028 and U+2029 are escaped so the output is also valid JavaScript.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendBytesString is AppendString for a byte slice. The conversion
// copies b to the stack when it is short (a token's bytes), so this only
// allocates for strings over 32 bytes. (AppendString is not generic over
// string and []byte: a generic version makes its argument escape, and
// with it every chunk the renderers build.)
func AppendBytesString(dst []byte, b []byte) []byte {
	return AppendString(dst, string(b))
}

// AppendFloat appends f as a JSON number the way Python's json writes a
// float32 logprob (shortest representation). -Inf becomes -9999.0 as vLLM
// clamps it; NaN becomes null.
func AppendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "null"...)
	case math.IsInf(f, -1) || f < -9999:
		return append(dst, "-9999.0"...)
	case math.IsInf(f, 1):
		return append(dst, "9999.0"...)
	}
	n := len(dst)
	dst = strconv.AppendFloat(dst, f, 'g', -1, bits)
	// Keep it a float literal ("-1.0", not "-1") and avoid exponent forms
	// Python would not write for ordinary magnitudes.
	hasDot := false
	for _, c := range dst[n:] {
		if c == '.' || c == 'e' || c == 'E' {
			hasDot = true
			break
		}
	}
	if !hasDot {
		dst = append(dst, ".0"...)
	}
	return dst
}

// AppendByteArray appends b as a JSON array of integers (the "bytes" field
// of chat logprobs).
func AppendByteArray(dst []byte, b []byte) []byte {
	dst = append(dst, '[')
	for i, c := range b {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, uint64(c), 10)
	}
	return append(dst, ']')
}
