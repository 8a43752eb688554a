package constraint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// jkind is the kind of a parsed JSON value.
type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNum
	jStr
	jArr
	jObj
)

// jv is a JSON value that keeps object member order (JSON Schema
// "properties" order is significant for generation).
type jv struct {
	kind jkind
	b    bool
	num  json.Number
	str  string
	arr  []*jv
	keys []string
	vals []*jv
}

// get returns the member named k of an object, or nil.
func (v *jv) get(k string) *jv {
	if v == nil || v.kind != jObj {
		return nil
	}
	for i, key := range v.keys {
		if key == k {
			return v.vals[i]
		}
	}
	return nil
}

// maxJSONDepth bounds nesting so hostile input cannot exhaust the stack.
const maxJSONDepth = 256

// parseJSON parses exactly one JSON value, keeping member order and
// rejecting duplicate keys.
func parseJSON(data []byte) (*jv, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder, depth int) (*jv, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("JSON nested deeper than %d", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("parse JSON: %w", err)
	}
	switch t := tok.(type) {
	case nil:
		return &jv{kind: jNull}, nil
	case bool:
		return &jv{kind: jBool, b: t}, nil
	case json.Number:
		return &jv{kind: jNum, num: t}, nil
	case string:
		return &jv{kind: jStr, str: t}, nil
	case json.Delim:
		switch t {
		case '[':
			v := &jv{kind: jArr, arr: []*jv{}}
			for dec.More() {
				e, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.arr = append(v.arr, e)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("parse JSON: %w", err)
			}
			return v, nil
		case '{':
			v := &jv{kind: jObj}
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("parse JSON: %w", err)
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("parse JSON: object key is not a string")
				}
				if seen[k] {
					return nil, fmt.Errorf("parse JSON: duplicate key %q", k)
				}
				seen[k] = true
				e, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, k)
				v.vals = append(v.vals, e)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("parse JSON: %w", err)
			}
			return v, nil
		}
	}
	return nil, fmt.Errorf("parse JSON: unexpected token %v", tok)
}

// canonical writes v as compact JSON. Object keys are sorted except in
// objects for which keepOrder(path) is true (schema "properties"), so
// semantically equal schemas serialise identically. Numbers are normalised
// (1.0 and 1 are the same number; exponents are expanded where exact).
func canonical(sb *strings.Builder, v *jv, keepOrder bool) {
	switch v.kind {
	case jNull:
		sb.WriteString("null")
	case jBool:
		sb.WriteString(strconv.FormatBool(v.b))
	case jNum:
		sb.WriteString(canonicalNumber(v.num))
	case jStr:
		writeJSONString(sb, v.str)
	case jArr:
		sb.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				sb.WriteByte(',')
			}
			canonical(sb, e, false)
		}
		sb.WriteByte(']')
	case jObj:
		idx := make([]int, len(v.keys))
		for i := range idx {
			idx[i] = i
		}
		if !keepOrder {
			sort.Slice(idx, func(a, b int) bool { return v.keys[idx[a]] < v.keys[idx[b]] })
		}
		sb.WriteByte('{')
		for n, i := range idx {
			if n > 0 {
				sb.WriteByte(',')
			}
			writeJSONString(sb, v.keys[i])
			sb.WriteByte(':')
			canonical(sb, v.vals[i], v.keys[i] == "properties" && v.vals[i].kind == jObj)
		}
		sb.WriteByte('}')
	}
}

// canonicalNumber normalises a JSON number's text: integers print as
// integers, other values in Go's shortest float form.
func canonicalNumber(n json.Number) string {
	s := string(n)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return strconv.FormatInt(i, 10)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	if f == float64(int64(f)) && f > -1e15 && f < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// writeJSONString writes s as a JSON string without HTML escaping.
func writeJSONString(sb *strings.Builder, s string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // cannot fail for a string
	sb.Write(bytes.TrimRight(buf.Bytes(), "\n"))
}

// jsonText returns the canonical compact JSON text of v.
func jsonText(v *jv) string {
	var sb strings.Builder
	canonical(&sb, v, false)
	return sb.String()
}
