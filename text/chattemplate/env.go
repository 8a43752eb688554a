package chattemplate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nikolalohinski/gonja/v2/builtins"
	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
)

// This file builds the gonja environment that mirrors Hugging Face's
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
// extensions=[loopcontrols]) with HF's tojson, raise_exception and
// strftime_now. Each Template gets its own sets, so nothing global is
// modified.

// maxMacroDepth bounds macro recursion (Python raises RecursionError; an
// unbounded Go recursion would kill the process).
const maxMacroDepth = 64

// stateKey is the context name of the per-render state.
const stateKey = "__sluice_render_state"

// renderState is what one Render call's template functions share.
type renderState struct {
	raised     *string // message given to raise_exception
	macroDepth int
}

func newConfig() *config.Config {
	c := config.New()
	c.TrimBlocks = true
	c.LeftStripBlocks = true
	c.KeepTrailingNewline = false
	c.AutoEscape = false
	return c
}

func newEnvironment() (*exec.Environment, error) {
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	for name, f := range map[string]exec.FilterFunction{"tojson": filterToJSON, "items": filterItems, "dictsort": filterDictsort} {
		if filters.Exists(name) {
			if err := filters.Replace(name, f); err != nil {
				return nil, fmt.Errorf("replace filter %s: %w", name, err)
			}
		} else if err := filters.Register(name, f); err != nil {
			return nil, fmt.Errorf("register filter %s: %w", name, err)
		}
	}

	// No loader is reachable (as in HF): drop the structures that load
	// other templates. Macros get a recursion bound.
	cs := exec.NewControlStructureSet(map[string]parser.ControlStructureParser{}).Update(builtins.ControlStructures)
	structures := exec.NewControlStructureSet(map[string]parser.ControlStructureParser{})
	for _, name := range []string{"autoescape", "block", "filter", "for", "if", "raw", "set", "with", "do", "break", "continue", "call", "macro"} {
		p, ok := cs.Get(name)
		if !ok {
			continue
		}
		if name == "macro" {
			p = boundedMacroParser(p)
		}
		if err := structures.Register(name, p); err != nil {
			return nil, fmt.Errorf("register %s: %w", name, err)
		}
	}

	methods := builtins.Methods
	methods.Dict = orderedDictMethods()
	methods.Str = strMethods()

	ctx := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	// gonja's range feeds a channel from a goroutine that leaks when a loop
	// breaks early; this one returns a bounded list.
	ctx.Set("range", rangeFunc)
	// Jinja's namespace, printed to a bounded depth (namespace.go)
	ctx.Set("namespace", namespaceFunc)
	return &exec.Environment{
		Context:           ctx,
		Filters:           filters,
		Tests:             exec.NewTestSet(map[string]exec.TestFunction{}).Update(builtins.Tests),
		ControlStructures: structures,
		Methods:           methods,
	}, nil
}

// filterToJSON is HF's tojson: json.dumps(x, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False), key order preserved.
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	o := defaultJSONOptions()
	for i, a := range params.Args {
		switch i {
		case 0:
			o.ensureASCII = a.IsTrue()
		case 1:
			setIndent(&o, a)
		default:
			return exec.AsValue(fmt.Errorf("tojson: too many positional arguments"))
		}
	}
	for k, a := range params.KwArgs {
		switch k {
		case "ensure_ascii":
			o.ensureASCII = a.IsTrue()
		case "indent":
			if err := setIndent(&o, a); err != nil {
				return exec.AsValue(err)
			}
		case "sort_keys":
			o.sortKeys = a.IsTrue()
		case "separators":
			if a.IsNil() {
				continue
			}
			if !a.IsList() || a.Len() != 2 {
				return exec.AsValue(fmt.Errorf("tojson: separators must be a pair of strings"))
			}
			o.itemSep, o.keySep = a.Index(0).String(), a.Index(1).String()
			o.hasCustomSeps = true
		default:
			return exec.AsValue(fmt.Errorf("tojson: unexpected keyword argument %q", k))
		}
	}
	if o.hasIndent && !o.hasCustomSeps {
		o.itemSep = ","
	}
	s, err := pyDumps(in, o)
	if err != nil {
		return exec.AsValue(err)
	}
	return exec.AsSafeValue(s)
}

func setIndent(o *jsonOptions, a *exec.Value) error {
	switch {
	case a.IsNil():
		o.hasIndent = false
	case a.IsInteger():
		o.hasIndent = true
		o.indent = strings.Repeat(" ", max(0, a.Integer()))
	case a.IsString():
		o.hasIndent = true
		o.indent = a.String()
	default:
		return fmt.Errorf("tojson: indent must be an integer or a string")
	}
	return nil
}

// orderedDictMethods are dict methods that keep *exec.Dict key order
// (gonja's own sort the keys). Other methods fall back to gonja's.
func orderedDictMethods() *exec.MethodSet[map[string]any] {
	base := builtins.Methods.Dict
	pairsOf := func(self *exec.Value) ([]*exec.Pair, bool) {
		switch d := self.Interface().(type) {
		case *exec.Dict:
			return d.Pairs, true
		case exec.Dict:
			return d.Pairs, true
		}
		return nil, false
	}
	ordered := func(name string, f func(pairs []*exec.Pair) any) exec.Method[map[string]any] {
		fallback, _ := base.Get(name)
		return func(self map[string]any, selfValue *exec.Value, args *exec.VarArgs) (any, error) {
			pairs, ok := pairsOf(selfValue)
			if !ok {
				if fallback == nil {
					return nil, fmt.Errorf("unknown method %q", name)
				}
				return fallback(self, selfValue, args)
			}
			if len(args.Args) > 0 || len(args.KwArgs) > 0 {
				return nil, exec.ErrInvalidCall(fmt.Errorf("%s() takes no arguments", name))
			}
			return f(pairs), nil
		}
	}
	m := map[string]exec.Method[map[string]any]{
		"keys": ordered("keys", func(pairs []*exec.Pair) any {
			out := make([]any, len(pairs))
			for i, p := range pairs {
				out[i] = p.Key
			}
			return out
		}),
		"values": ordered("values", func(pairs []*exec.Pair) any {
			out := make([]any, len(pairs))
			for i, p := range pairs {
				out[i] = p.Value
			}
			return out
		}),
		"items": ordered("items", func(pairs []*exec.Pair) any {
			out := make([]any, len(pairs))
			for i, p := range pairs {
				out[i] = []any{p.Key, p.Value}
			}
			return out
		}),
	}
	for _, name := range []string{"get", "pop", "setdefault", "update", "copy", "clear"} {
		if f, ok := base.Get(name); ok {
			m[name] = f
		}
	}
	return exec.NewMethodSet(m)
}

// maxRange bounds the length of a range() list.
const maxRange = 1 << 20

// rangeFunc is Python's range(stop) / range(start, stop[, step]) as a list.
func rangeFunc(_ *exec.Evaluator, params *exec.VarArgs) ([]int, error) {
	var start, stop, step = 0, 0, 1
	args := params.Args
	for _, a := range args {
		if !a.IsInteger() {
			return nil, exec.ErrInvalidCall(errors.New("range() arguments must be integers"))
		}
	}
	switch len(args) {
	case 1:
		stop = args[0].Integer()
	case 2:
		start, stop = args[0].Integer(), args[1].Integer()
	case 3:
		start, stop, step = args[0].Integer(), args[1].Integer(), args[2].Integer()
	default:
		return nil, exec.ErrInvalidCall(errors.New("range() takes 1 to 3 integer arguments"))
	}
	if step == 0 {
		return nil, exec.ErrInvalidCall(errors.New("range() step must not be zero"))
	}
	n := 0
	if step > 0 && stop > start {
		n = (stop - start + step - 1) / step
	} else if step < 0 && start > stop {
		n = (start - stop - step - 1) / -step
	}
	if n > maxRange {
		return nil, fmt.Errorf("range() of %d items is too long", n)
	}
	out := make([]int, n)
	for i := range out {
		out[i] = start + i*step
	}
	return out, nil
}

// raiseFunc is HF's raise_exception: it aborts rendering with msg, which
// Render returns as the Error's Message.
func raiseFunc(st *renderState) func(*exec.Evaluator, *exec.VarArgs) (*exec.Value, error) {
	return func(_ *exec.Evaluator, params *exec.VarArgs) (*exec.Value, error) {
		msg := ""
		if len(params.Args) > 0 {
			msg = params.Args[0].String()
		}
		if st.raised == nil {
			st.raised = &msg
		}
		return nil, errors.New(msg)
	}
}

// boundedMacroParser wraps gonja's macro structure so that each defined
// macro counts its nesting depth in the render state.
func boundedMacroParser(inner parser.ControlStructureParser) parser.ControlStructureParser {
	return func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
		cs, err := inner(p, args)
		if err != nil {
			return nil, err
		}
		ecs, ok := cs.(exec.ControlStructure)
		if !ok {
			return nil, fmt.Errorf("macro: unexpected node %T", cs)
		}
		return &boundedMacro{ControlStructure: ecs}, nil
	}
}

type boundedMacro struct {
	exec.ControlStructure
}

func (b *boundedMacro) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	if err := b.ControlStructure.Execute(r, tag); err != nil {
		return err
	}
	name := macroName(b.ControlStructure)
	if name == "" {
		return nil
	}
	v, ok := r.Environment.Context.Get(name)
	if !ok {
		return nil
	}
	fn, ok := v.(exec.Macro)
	if !ok {
		return nil
	}
	stv, _ := r.Environment.Context.Get(stateKey)
	st, ok := stv.(*renderState)
	if !ok {
		return nil
	}
	r.Environment.Context.Set(name, exec.Macro(func(params *exec.VarArgs) *exec.Value {
		if st.macroDepth >= maxMacroDepth {
			return exec.AsValue(fmt.Errorf("macro %s: recursion deeper than %d", name, maxMacroDepth))
		}
		st.macroDepth++
		defer func() { st.macroDepth-- }()
		return fn(params)
	}))
	return nil
}

// macroName returns the name of the macro a gonja macro structure defines.
func macroName(cs exec.ControlStructure) string {
	if m, ok := cs.(*controlStructures.MacroControlStructure); ok && m.Macro != nil {
		return m.Name
	}
	return ""
}
