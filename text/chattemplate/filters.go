package chattemplate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// gonja's items and dictsort filters return nothing for its own ordered
// dicts (the type JSON objects become here); these handle them.

// dictPairs returns the key/value pairs of a dict value in order (a Go map
// in sorted key order), or ok false when in is not a dict.
func dictPairs(in *exec.Value) (pairs []*exec.Pair, ok bool) {
	switch d := in.Interface().(type) {
	case *exec.Dict:
		return d.Pairs, true
	case exec.Dict:
		return d.Pairs, true
	}
	if !in.IsDict() {
		return nil, false
	}
	for _, k := range in.Keys() {
		v, _ := in.GetItem(k.Interface())
		pairs = append(pairs, &exec.Pair{Key: k, Value: v})
	}
	return pairs, true
}

func pairList(pairs []*exec.Pair) []any {
	out := make([]any, len(pairs))
	for i, p := range pairs {
		out[i] = []any{p.Key, p.Value}
	}
	return out
}

// filterItems is Jinja's items filter: the (key, value) pairs of a dict.
func filterItems(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if in.IsNil() {
		return exec.AsValue([]any{})
	}
	pairs, ok := dictPairs(in)
	if !ok {
		return exec.AsValue(fmt.Errorf("items: can only get item pairs from a mapping"))
	}
	return exec.AsValue(pairList(pairs))
}

// filterDictsort is Jinja's dictsort(case_sensitive=false, by='key',
// reverse=false).
func filterDictsort(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	pairs, ok := dictPairs(in)
	if !ok {
		return exec.AsValue(fmt.Errorf("dictsort: value is not a mapping"))
	}
	caseSensitive, byValue, reverse := false, false, false
	for i, a := range params.Args {
		switch i {
		case 0:
			caseSensitive = a.IsTrue()
		case 1:
			byValue = a.String() == "value"
		case 2:
			reverse = a.IsTrue()
		}
	}
	for k, a := range params.KwArgs {
		switch k {
		case "case_sensitive":
			caseSensitive = a.IsTrue()
		case "by":
			byValue = a.String() == "value"
		case "reverse":
			reverse = a.IsTrue()
		}
	}
	sorted := append([]*exec.Pair(nil), pairs...)
	key := func(p *exec.Pair) *exec.Value {
		if byValue {
			return p.Value
		}
		return p.Key
	}
	less := func(a, b *exec.Value) bool {
		if a.IsNumber() && b.IsNumber() {
			return a.Float() < b.Float()
		}
		as, bs := a.String(), b.String()
		if !caseSensitive {
			as, bs = strings.ToLower(as), strings.ToLower(bs)
		}
		return as < bs
	}
	sort.SliceStable(sorted, func(i, j int) bool {
		if reverse {
			return less(key(sorted[j]), key(sorted[i]))
		}
		return less(key(sorted[i]), key(sorted[j]))
	})
	return exec.AsValue(pairList(sorted))
}
