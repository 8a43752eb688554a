package chattemplate

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// maxReprDepth bounds how deep a namespace prints nested namespaces, lists
// and dicts: Python prints a value that contains itself as "...", while
// gonja's printer would recurse until the Go stack overflows, which kills
// the process (`{% set ns.a = ns %}{{ ns }}`).
const maxReprDepth = 16

// namespace is Jinja's namespace(): a map whose attributes a template sets
// with `{% set ns.attr = … %}`. It prints as Jinja does (<Namespace {…}>),
// to a bounded depth.
type namespace map[string]any

// namespaceFunc is the namespace() global: the keyword arguments become
// the attributes.
func namespaceFunc(_ *exec.Evaluator, params *exec.VarArgs) namespace {
	ns := namespace{}
	for k, v := range params.KwArgs {
		ns[k] = v
	}
	return ns
}

// String prints ns as Jinja's Namespace repr, nested values bounded by
// maxReprDepth.
func (ns namespace) String() string {
	var b strings.Builder
	writeRepr(&b, ns, 0)
	return b.String()
}

// writeRepr prints v as Python's repr would, namespaces as Jinja's,
// stopping at maxReprDepth with "...".
func writeRepr(b *strings.Builder, v any, depth int) {
	if depth > maxReprDepth {
		b.WriteString("...")
		return
	}
	switch t := v.(type) {
	case *exec.Value:
		if t == nil || t.IsNil() {
			b.WriteString("None")
			return
		}
		writeRepr(b, t.Interface(), depth)
	case namespace:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("<Namespace {")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(b, "'%s': ", k)
			writeRepr(b, t[k], depth+1)
		}
		b.WriteString("}>")
	case *exec.Dict:
		b.WriteByte('{')
		for i, p := range t.Pairs {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, p.Key, depth+1)
			b.WriteString(": ")
			writeRepr(b, p.Value, depth+1)
		}
		b.WriteByte('}')
	case string:
		fmt.Fprintf(b, "'%s'", t)
	default:
		rv := reflect.ValueOf(v)
		if k := rv.Kind(); (k == reflect.Slice || k == reflect.Array) && rv.Type().Elem().Kind() != reflect.Uint8 {
			b.WriteByte('[')
			for i := range rv.Len() {
				if i > 0 {
					b.WriteString(", ")
				}
				writeRepr(b, rv.Index(i).Interface(), depth+1)
			}
			b.WriteByte(']')
			return
		}
		b.WriteString(exec.ToValue(v).String())
	}
}
