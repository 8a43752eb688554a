package detok

import "unicode/utf8"

// seqLen returns the length of the UTF-8 sequence that lead byte c starts,
// and the valid range of its second byte; n is 0 when c cannot start one.
func seqLen(c byte) (n int, lo, hi byte) {
	switch {
	case c < 0x80:
		return 1, 0, 0
	case c < 0xC2:
		return 0, 0, 0
	case c < 0xE0:
		return 2, 0x80, 0xBF
	case c == 0xE0:
		return 3, 0xA0, 0xBF
	case c == 0xED:
		return 3, 0x80, 0x9F
	case c < 0xF0:
		return 3, 0x80, 0xBF
	case c == 0xF0:
		return 4, 0x90, 0xBF
	case c < 0xF4:
		return 4, 0x80, 0xBF
	case c == 0xF4:
		return 4, 0x80, 0x8F
	}
	return 0, 0, 0
}

// prefixLen returns how many bytes of a well-formed UTF-8 sequence start at
// b[0], and the sequence's full length. A result with got < want means the
// sequence is truncated (by the end of b) or broken (by an invalid byte).
func prefixLen(b []byte) (got, want int) {
	want, lo, hi := seqLen(b[0])
	switch want {
	case 0:
		return 1, 2 // not a lead byte: a one-byte ill-formed subsequence
	case 1:
		return 1, 1
	}
	got = 1
	for got < want && got < len(b) {
		c := b[got]
		if got == 1 {
			if c < lo || c > hi {
				break
			}
		} else if c < 0x80 || c > 0xBF {
			break
		}
		got++
	}
	return got, want
}

// completeLen returns the length of the longest prefix of b whose decoding
// cannot change whatever bytes follow: everything except a trailing,
// so-far-valid but truncated UTF-8 sequence.
func completeLen(b []byte) int {
	// A truncated sequence is at most 3 bytes long: look back for its lead.
	for i := len(b) - 1; i >= 0 && i >= len(b)-3; i-- {
		c := b[i]
		if c >= 0x80 && c < 0xC0 {
			continue // continuation byte: keep looking for the lead
		}
		if n, _, _ := seqLen(c); n < 2 {
			return len(b) // ASCII or an invalid byte: nothing to wait for
		}
		if got, want := prefixLen(b[i:]); got == len(b)-i && got < want {
			return i
		}
		return len(b)
	}
	return len(b)
}

// appendLossy appends b decoded as UTF-8 to dst, replacing each maximal
// ill-formed subsequence with U+FFFD, as Rust's String::from_utf8_lossy and
// Python's bytes.decode(errors="replace") do (and so Hugging Face's
// tokenizers).
func appendLossy(dst, b []byte) []byte {
	if utf8.Valid(b) {
		return append(dst, b...)
	}
	for i := 0; i < len(b); {
		if b[i] < 0x80 {
			dst = append(dst, b[i])
			i++
			continue
		}
		got, want := prefixLen(b[i:])
		if got == want {
			dst = append(dst, b[i:i+got]...)
		} else {
			dst = append(dst, "\uFFFD"...)
		}
		i += got
	}
	return dst
}
