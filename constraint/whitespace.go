package constraint

import (
	"fmt"
	"strings"
)

// Whitespace says how much whitespace a JSON grammar (json_schema,
// json_object) allows between JSON tokens. It travels in the constraint's
// Kind: "json_schema" is WhitespaceBounded, other modes add a suffix
// ("json_schema+compact", "json_object+any").
type Whitespace uint8

const (
	// WhitespaceBounded is the default, after llama.cpp's JSON grammar
	// (json-schema-to-grammar's "space" rule: nothing, a space, or a
	// newline and at most 20 spaces or tabs): no whitespace before the
	// root value; where a pretty-printer breaks lines (after "{", "[" and
	// ",", before "}" and "]") nothing, a space, or a newline followed by
	// at most 20 spaces or tabs of indentation; around ":" and before ","
	// at most a space. Compact JSON and the usual pretty-printed forms
	// (json.dumps with indent, JSON.stringify, MarshalIndent) fit, and a
	// small model cannot spend its token budget on whitespace.
	WhitespaceBounded Whitespace = iota
	// WhitespaceCompact allows at most one space between tokens and none
	// before the root value (vLLM's disable_any_whitespace).
	WhitespaceCompact
	// WhitespaceAny is Sluice's earlier grammar, kept behind an explicit
	// option: up to 20 bytes of spaces, tabs and newlines before the root
	// value and on each side of every structural character.
	WhitespaceAny
)

// whitespaceNames are the modes' names, as flags and Kind suffixes spell
// them.
var whitespaceNames = [...]string{WhitespaceBounded: "bounded", WhitespaceCompact: "compact", WhitespaceAny: "any"}

// String returns the mode's name: bounded, compact or any.
func (w Whitespace) String() string {
	if int(w) < len(whitespaceNames) {
		return whitespaceNames[w]
	}
	return fmt.Sprintf("Whitespace(%d)", w)
}

// ParseWhitespace parses a mode name (bounded, compact or any; "" is
// bounded).
func ParseWhitespace(s string) (Whitespace, error) {
	if s == "" {
		return WhitespaceBounded, nil
	}
	for i, n := range whitespaceNames {
		if s == n {
			return Whitespace(i), nil
		}
	}
	return 0, fmt.Errorf("parse whitespace mode: %q is not one of bounded, compact, any", s)
}

// regex returns the whitespace allowed where a line may break.
func (w Whitespace) regex() string {
	switch w {
	case WhitespaceCompact:
		return ` ?`
	case WhitespaceAny:
		return `[ \t\n]{0,20}`
	}
	return `(?: |\n[ \t]{0,20})?`
}

// inlineRegex returns the whitespace allowed around ":" and before ",".
func (w Whitespace) inlineRegex() string {
	if w == WhitespaceAny {
		return w.regex()
	}
	return ` ?`
}

// rootRegex returns the whitespace allowed before the root value ("" for
// none).
func (w Whitespace) rootRegex() string {
	if w == WhitespaceAny {
		return w.regex()
	}
	return ""
}

// jsonKind returns the Kind of a JSON constraint of base kind and mode w.
func jsonKind(base string, w Whitespace) string {
	if w == WhitespaceBounded {
		return base
	}
	return base + "+" + w.String()
}

// splitKind splits a Kind into its base kind and whitespace mode.
func splitKind(kind string) (string, Whitespace, error) {
	base, mode, ok := strings.Cut(kind, "+")
	if !ok {
		return kind, WhitespaceBounded, nil
	}
	if base != KindJSONSchema && base != KindJSONObject {
		return "", 0, fmt.Errorf("unknown constraint kind %q", kind)
	}
	w, err := ParseWhitespace(mode)
	if err != nil || mode == "" || mode == whitespaceNames[WhitespaceBounded] {
		return "", 0, fmt.Errorf("unknown constraint kind %q", kind)
	}
	return base, w, nil
}

// IsJSON reports whether kind is a JSON constraint (json_schema or
// json_object, in any whitespace mode).
func IsJSON(kind string) bool {
	base, _, err := splitKind(kind)
	return err == nil && (base == KindJSONSchema || base == KindJSONObject)
}
