package chattemplate

import (
	"errors"
	"strings"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// gonja's str.strip/lstrip/rstrip/split/rsplit mishandle their default
// arguments (lstrip() and split() fail outright); these follow Python.

// strMethodNames are gonja's string methods, kept unless overridden.
var strMethodNames = []string{
	"capitalize", "capwords", "casefold", "center", "count", "encode", "endswith", "expandtabs",
	"find", "format", "format_map", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit",
	"islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust",
	"lower", "lstrip", "partition", "removeprefix", "removesuffix", "replace", "rfind", "rjust",
	"rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase",
	"title", "upper", "zfill",
}

func strMethods() *exec.MethodSet[string] {
	m := map[string]exec.Method[string]{}
	for _, name := range strMethodNames {
		if f, ok := builtins.Methods.Str.Get(name); ok {
			m[name] = f
		}
	}
	m["strip"] = stripMethod(true, true)
	m["lstrip"] = stripMethod(true, false)
	m["rstrip"] = stripMethod(false, true)
	m["split"] = splitMethod(false)
	m["rsplit"] = splitMethod(true)
	m["endswith"] = affixMethod(strings.HasSuffix)
	m["startswith"] = affixMethod(strings.HasPrefix)
	return exec.NewMethodSet(m)
}

// optString reads optional positional argument i: absent or none gives
// ok false.
func optString(args *exec.VarArgs, i int, name string) (s string, ok bool, err error) {
	v := args.Args
	if i >= len(v) {
		if kw, found := args.KwArgs[name]; found {
			v = []*exec.Value{kw}
			i = 0
		} else {
			return "", false, nil
		}
	}
	if v[i].IsNil() {
		return "", false, nil
	}
	if !v[i].IsString() {
		return "", false, exec.ErrInvalidCall(errors.New(name + " must be a string or none"))
	}
	return v[i].String(), true, nil
}

func stripMethod(left, right bool) exec.Method[string] {
	return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		chars, ok, err := optString(args, 0, "chars")
		if err != nil {
			return nil, err
		}
		cut := isPySpace
		if ok {
			cut = func(r rune) bool { return strings.ContainsRune(chars, r) }
		}
		if left {
			self = strings.TrimLeftFunc(self, cut)
		}
		if right {
			self = strings.TrimRightFunc(self, cut)
		}
		return self, nil
	}
}

func splitMethod(fromRight bool) exec.Method[string] {
	return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		sep, hasSep, err := optString(args, 0, "sep")
		if err != nil {
			return nil, err
		}
		maxsplit := -1
		if len(args.Args) > 1 {
			if !args.Args[1].IsInteger() {
				return nil, exec.ErrInvalidCall(errors.New("maxsplit must be an integer"))
			}
			maxsplit = args.Args[1].Integer()
		} else if kw, ok := args.KwArgs["maxsplit"]; ok && kw.IsInteger() {
			maxsplit = kw.Integer()
		}
		var parts []string
		switch {
		case hasSep && sep == "":
			return nil, exec.ErrInvalidCall(errors.New("empty separator"))
		case hasSep:
			parts = pySplitSep(self, sep, maxsplit, fromRight)
		default:
			parts = pySplitSpace(self, maxsplit, fromRight)
		}
		out := make([]any, len(parts))
		for i, p := range parts {
			out[i] = p
		}
		return out, nil
	}
}

func pySplitSep(s, sep string, maxsplit int, fromRight bool) []string {
	if maxsplit < 0 {
		return strings.Split(s, sep)
	}
	if !fromRight {
		return strings.SplitN(s, sep, maxsplit+1)
	}
	var rev []string
	for len(rev) < maxsplit {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		rev = append(rev, s[i+len(sep):])
		s = s[:i]
	}
	out := []string{s}
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i])
	}
	return out
}

// pySplitSpace is str.split() / str.rsplit() with no separator: runs of
// whitespace separate, and empty strings are dropped.
func pySplitSpace(s string, maxsplit int, fromRight bool) []string {
	if maxsplit < 0 {
		return strings.FieldsFunc(s, isPySpace)
	}
	var out []string
	if !fromRight {
		rest := strings.TrimLeftFunc(s, isPySpace)
		for rest != "" && len(out) < maxsplit {
			i := strings.IndexFunc(rest, isPySpace)
			if i < 0 {
				break
			}
			out = append(out, rest[:i])
			rest = strings.TrimLeftFunc(rest[i:], isPySpace)
		}
		if rest != "" {
			out = append(out, rest)
		}
		return out
	}
	rest := strings.TrimRightFunc(s, isPySpace)
	var rev []string
	for rest != "" && len(rev) < maxsplit {
		i := strings.LastIndexFunc(rest, isPySpace)
		if i < 0 {
			break
		}
		_, w := utf8DecodeAt(rest, i)
		rev = append(rev, rest[i+w:])
		rest = strings.TrimRightFunc(rest[:i], isPySpace)
	}
	if rest != "" {
		out = append(out, rest)
	}
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i])
	}
	return out
}

func utf8DecodeAt(s string, i int) (rune, int) {
	for w := 1; w <= 4 && i+w <= len(s); w++ {
		if r := []rune(s[i : i+w]); len(r) == 1 && r[0] != '\uFFFD' {
			return r[0], w
		}
	}
	return '\uFFFD', 1
}

// affixMethod is str.startswith / str.endswith with a string or a tuple
// (list) of strings.
func affixMethod(test func(s, affix string) bool) exec.Method[string] {
	return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		if len(args.Args) == 0 {
			return nil, exec.ErrInvalidCall(errors.New("missing argument"))
		}
		a := args.Args[0]
		if a.IsString() {
			return test(self, a.String()), nil
		}
		if a.IsList() {
			for i := range a.Len() {
				if item := a.Index(i); item.IsString() && test(self, item.String()) {
					return true, nil
				}
			}
			return false, nil
		}
		return nil, exec.ErrInvalidCall(errors.New("argument must be a string or a tuple of strings"))
	}
}
