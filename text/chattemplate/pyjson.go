package chattemplate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// This file converts between JSON and template values. JSON objects become
// *exec.Dict, gonja's ordered dict, so that tool schemas and tool-call
// arguments keep the client's key order, and tojson writes them back the
// way Python's json.dumps does.

// fromJSON decodes one JSON value into template values: objects as
// *exec.Dict (key order kept), arrays as []any, integers as int (float64
// when they do not fit), other numbers as float64.
func fromJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := exec.NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v is not a string", kt)
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				setPair(d, key, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			if len(d.Pairs) == 0 {
				// gonja treats every *exec.Dict as true; Jinja treats
				// {} as false (gpt-oss's "if tool.parameters.properties").
				// An empty Go map has gonja's Python truthiness.
				return map[string]any{}, nil
			}
			return d, nil
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return list, nil
		}
		return nil, fmt.Errorf("unexpected delimiter %v", t)
	case json.Number:
		s := t.String()
		if !strings.ContainsAny(s, ".eE") {
			if n, err := strconv.Atoi(s); err == nil {
				return n, nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !math.IsInf(f, 0) {
			return nil, err
		}
		return f, nil
	default: // string, bool, nil
		return t, nil
	}
}

// setPair sets key in d, replacing an earlier pair with the same key in
// place (as a Python dict does for a repeated JSON key).
func setPair(d *exec.Dict, key string, v any) {
	for _, p := range d.Pairs {
		if p.Key.String() == key {
			p.Value = exec.AsValue(v)
			return
		}
	}
	d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(key), Value: exec.AsValue(v)})
}

// dictGet returns the value under key in d.
func dictGet(d *exec.Dict, key string) (any, bool) {
	for _, p := range d.Pairs {
		if p.Key.IsString() && p.Key.String() == key {
			return p.Value.Interface(), true
		}
	}
	return nil, false
}

// jsonOptions are the json.dumps arguments HF's tojson accepts.
type jsonOptions struct {
	ensureASCII bool
	indent      string // "" with hasIndent false: compact
	hasIndent   bool
	itemSep     string
	keySep      string
	sortKeys    bool
	// hasCustomSeps is set when the template passed separators.
	hasCustomSeps bool
}

func defaultJSONOptions() jsonOptions {
	return jsonOptions{itemSep: ", ", keySep: ": "}
}

// pyDumps serializes v as Python's json.dumps does.
func pyDumps(v any, o jsonOptions) (string, error) {
	var b strings.Builder
	if err := writeJSON(&b, v, o, 0, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

const maxJSONDepth = 512

func writeJSON(b *strings.Builder, v any, o jsonOptions, level, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("tojson: value nested too deeply")
	}
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
		return nil
	case *exec.Value:
		if t == nil {
			b.WriteString("null")
			return nil
		}
		return writeJSON(b, t.Interface(), o, level, depth+1)
	case string:
		writePyString(b, t, o.ensureASCII)
		return nil
	case bool:
		if t {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
		return nil
	case float64:
		b.WriteString(pyFloatRepr(t))
		return nil
	case float32:
		b.WriteString(pyFloatRepr(float64(t)))
		return nil
	case *exec.Dict:
		if t == nil {
			b.WriteString("null")
			return nil
		}
		return writeObject(b, t.Pairs, o, level, depth)
	case exec.Dict:
		return writeObject(b, t.Pairs, o, level, depth)
	case error:
		return t
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(rv.Int(), 10))
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		b.WriteString(strconv.FormatUint(rv.Uint(), 10))
		return nil
	case reflect.String:
		writePyString(b, rv.String(), o.ensureASCII)
		return nil
	case reflect.Bool:
		return writeJSON(b, rv.Bool(), o, level, depth)
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			b.WriteString("null")
			return nil
		}
		return writeJSON(b, rv.Elem().Interface(), o, level, depth+1)
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			b.WriteString("[]")
			return nil
		}
		n := rv.Len()
		if n == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i := range n {
			if i > 0 {
				writeItemSep(b, o)
			}
			writeNewline(b, o, level+1)
			if err := writeJSON(b, rv.Index(i).Interface(), o, level+1, depth+1); err != nil {
				return err
			}
		}
		writeNewline(b, o, level)
		b.WriteByte(']')
		return nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return fmt.Errorf("tojson: map keys must be strings, not %s", rv.Type().Key())
		}
		keys := make([]string, 0, rv.Len())
		for _, k := range rv.MapKeys() {
			keys = append(keys, k.String())
		}
		// A Go map has no insertion order; sorted keys are deterministic.
		sort.Strings(keys)
		pairs := make([]*exec.Pair, len(keys))
		for i, k := range keys {
			pairs[i] = &exec.Pair{Key: exec.AsValue(k), Value: exec.ToValue(rv.MapIndex(reflect.ValueOf(k).Convert(rv.Type().Key())))}
		}
		return writeObject(b, pairs, o, level, depth)
	case reflect.Chan, reflect.Func:
		return fmt.Errorf("tojson: object of type %s is not JSON serializable", rv.Type())
	}
	return fmt.Errorf("tojson: object of type %T is not JSON serializable", v)
}

func writeObject(b *strings.Builder, pairs []*exec.Pair, o jsonOptions, level, depth int) error {
	if len(pairs) == 0 {
		b.WriteString("{}")
		return nil
	}
	if o.sortKeys {
		sorted := append([]*exec.Pair(nil), pairs...)
		sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Key.String() < sorted[j].Key.String() })
		pairs = sorted
	}
	b.WriteByte('{')
	for i, p := range pairs {
		if i > 0 {
			writeItemSep(b, o)
		}
		writeNewline(b, o, level+1)
		var key string
		switch k := p.Key.Interface().(type) {
		case string:
			key = k
		case bool:
			key = map[bool]string{true: "true", false: "false"}[k]
		case nil:
			key = "null"
		default:
			var kb strings.Builder
			if err := writeJSON(&kb, k, o, 0, depth+1); err != nil {
				return err
			}
			key = kb.String()
		}
		writePyString(b, key, o.ensureASCII)
		b.WriteString(o.keySep)
		if err := writeJSON(b, p.Value, o, level+1, depth+1); err != nil {
			return err
		}
	}
	writeNewline(b, o, level)
	b.WriteByte('}')
	return nil
}

func writeItemSep(b *strings.Builder, o jsonOptions) {
	b.WriteString(o.itemSep)
}

func writeNewline(b *strings.Builder, o jsonOptions, level int) {
	if !o.hasIndent {
		return
	}
	b.WriteByte('\n')
	for range level {
		b.WriteString(o.indent)
	}
}

// writePyString writes s as a JSON string literal the way Python's json
// module does.
func writePyString(b *strings.Builder, s string, ensureASCII bool) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || (ensureASCII && r > 0x7e && r < 0x10000):
				b.WriteString(`\u`)
				b.WriteByte(hex[r>>12&0xf])
				b.WriteByte(hex[r>>8&0xf])
				b.WriteByte(hex[r>>4&0xf])
				b.WriteByte(hex[r&0xf])
			case ensureASCII && r >= 0x10000:
				r -= 0x10000
				hi, lo := 0xD800+(r>>10), 0xDC00+(r&0x3FF)
				for _, u := range []rune{hi, lo} {
					b.WriteString(`\u`)
					b.WriteByte(hex[u>>12&0xf])
					b.WriteByte(hex[u>>8&0xf])
					b.WriteByte(hex[u>>4&0xf])
					b.WriteByte(hex[u&0xf])
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// pyFloatRepr formats f as Python's repr(float) (and so json.dumps) does:
// the shortest round-trip digits, fixed notation for exponents in
// [-4, 16), otherwise d.ddde±XX.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // e.g. "-1.2345e+06"
	mant, expS, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expS)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	sign := ""
	if neg {
		sign = "-"
	}
	if exp >= -4 && exp < 16 {
		var s string
		if exp >= 0 {
			if len(digits) <= exp+1 {
				s = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
			} else {
				s = digits[:exp+1] + "." + digits[exp+1:]
			}
		} else {
			s = "0." + strings.Repeat("0", -exp-1) + digits
		}
		return sign + s
	}
	m := digits[:1]
	if len(digits) > 1 {
		m += "." + digits[1:]
	}
	es := fmt.Sprintf("%+03d", exp)
	return sign + m + "e" + es
}
