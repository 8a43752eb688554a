package constraint

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// larkCommon are the terminals of Lark's common.lark that %import may
// name, as RE2 patterns.
var larkCommon = map[string]string{
	"DIGIT":          `[0-9]`,
	"HEXDIGIT":       `[0-9a-fA-F]`,
	"INT":            `[0-9]+`,
	"SIGNED_INT":     `[+-]?[0-9]+`,
	"DECIMAL":        `(?:[0-9]+\.[0-9]*|\.[0-9]+)`,
	"FLOAT":          `(?:[0-9]+[eE][+-]?[0-9]+|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)`,
	"SIGNED_FLOAT":   `[+-]?(?:[0-9]+[eE][+-]?[0-9]+|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)`,
	"NUMBER":         `(?:[0-9]+[eE][+-]?[0-9]+|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+)`,
	"SIGNED_NUMBER":  `[+-]?(?:[0-9]+[eE][+-]?[0-9]+|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+)`,
	"ESCAPED_STRING": `"(?:[^"\\]|\\.)*"`,
	"LCASE_LETTER":   `[a-z]`,
	"UCASE_LETTER":   `[A-Z]`,
	"LETTER":         `[A-Za-z]`,
	"WORD":           `[A-Za-z]+`,
	"CNAME":          `[_A-Za-z][_A-Za-z0-9]*`,
	"WS_INLINE":      `[ \t]+`,
	"WS":             `[ \t\f\r\n]+`,
	"CR":             `\r`,
	"LF":             `\n`,
	"NEWLINE":        `(?:\r?\n)+`,
}

// IsLark reports whether grammar text looks like Lark rather than GBNF
// (vLLM's heuristic: no "::=" definitions).
func IsLark(text string) bool { return !strings.Contains(text, "::=") }

// larkParser reads the subset of Lark's EBNF used for constrained
// decoding: rule and terminal definitions (name: expansions), literals
// ("x", "x"i, "a".."z"), /regex/ with i and s flags, groups, [optional],
// ?, *, +, ~ n and ~ n..m, %import common.X (or common (X, Y)) and
// %ignore. The start rule is "start".
type larkParser struct {
	gbnfParser
}

// ParseLark reads a Lark grammar and lowers it to the IR.
func ParseLark(text string) (*Grammar, error) {
	p := &larkParser{gbnfParser{src: text}}
	rules := map[string]*gexpr{}
	terms := map[string]*gexpr{}
	var order []string
	var ignore []*gexpr
	for {
		p.lspace(true)
		if p.pos >= len(p.src) {
			break
		}
		if p.src[p.pos] == '%' {
			ig, err := p.directive(terms)
			if err != nil {
				return nil, err
			}
			ignore = append(ignore, ig...)
			continue
		}
		if p.src[p.pos] == '?' || p.src[p.pos] == '!' {
			p.pos++
		}
		name := p.name()
		if name == "" {
			return nil, p.errorf("expected a definition, found %q", p.rest())
		}
		if p.pos < len(p.src) && p.src[p.pos] == '.' { // priority
			p.pos++
			p.name()
		}
		p.lspace(false)
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return nil, p.errorf("expected : after %s", name)
		}
		p.pos++
		p.lspace(false)
		e, err := p.expansions()
		if err != nil {
			return nil, err
		}
		if isTerminalName(name) {
			if _, dup := terms[name]; dup {
				return nil, p.errorf("terminal %s defined twice", name)
			}
			terms[name] = e
			continue
		}
		if _, dup := rules[name]; dup {
			return nil, p.errorf("rule %s defined twice", name)
		}
		rules[name] = e
		order = append(order, name)
	}
	if rules["start"] == nil {
		return nil, fmt.Errorf("lark: no start rule")
	}
	// Terminals become regexes (inlining the terminals they name).
	regs := map[string]string{}
	var resolve func(name string, depth int) (string, error)
	var toRE func(e *gexpr, depth int) (string, error)
	toRE = func(e *gexpr, depth int) (string, error) {
		if e.kind == gRef {
			return resolve(e.name, depth+1)
		}
		if e.kind == gRegex {
			return e.re, nil
		}
		parts := make([]string, len(e.subs))
		for i, s := range e.subs {
			r, err := toRE(s, depth)
			if err != nil {
				return "", err
			}
			parts[i] = r
		}
		cp := *e
		cp.subs = make([]*gexpr, len(parts))
		for i, r := range parts {
			cp.subs[i] = &gexpr{kind: gRegex, re: r}
		}
		return toRegex(&cp), nil
	}
	resolve = func(name string, depth int) (string, error) {
		if r, ok := regs[name]; ok {
			return r, nil
		}
		if depth > 50 {
			return "", fmt.Errorf("lark: terminal %s is recursive", name)
		}
		e, ok := terms[name]
		if !ok {
			return "", fmt.Errorf("lark: undefined terminal %s", name)
		}
		r, err := toRE(e, depth)
		if err != nil {
			return "", err
		}
		regs[name] = r
		return r, nil
	}
	var ign string
	if len(ignore) > 0 {
		var parts []string
		for _, e := range ignore {
			r, err := toRE(e, 0)
			if err != nil {
				return nil, err
			}
			parts = append(parts, r)
		}
		ign = "(?:" + strings.Join(parts, "|") + ")*"
	}
	// Rules: terminal references become regexes; %ignore goes between
	// the items of every sequence.
	var fix func(e *gexpr) (*gexpr, error)
	fix = func(e *gexpr) (*gexpr, error) {
		if e.kind == gRef {
			if isTerminalName(e.name) {
				r, err := resolve(e.name, 0)
				if err != nil {
					return nil, err
				}
				return &gexpr{kind: gRegex, re: r}, nil
			}
			if rules[e.name] == nil {
				return nil, fmt.Errorf("lark: undefined rule %s", e.name)
			}
			return e, nil
		}
		cp := *e
		cp.subs = nil
		for i, s := range e.subs {
			f, err := fix(s)
			if err != nil {
				return nil, err
			}
			if ign != "" && e.kind == gSeq && i > 0 {
				cp.subs = append(cp.subs, &gexpr{kind: gRegex, re: ign})
			}
			if ign != "" && e.kind == gRepeat {
				// Repeated items are separated by ignorables too.
				f = &gexpr{kind: gSeq, subs: []*gexpr{{kind: gRegex, re: ign}, f}}
			}
			cp.subs = append(cp.subs, f)
		}
		return &cp, nil
	}
	for _, n := range order {
		f, err := fix(rules[n])
		if err != nil {
			return nil, err
		}
		rules[n] = f
	}
	if ign != "" {
		rules["start"] = &gexpr{kind: gSeq, subs: []*gexpr{{kind: gRegex, re: ign}, rules["start"], {kind: gRegex, re: ign}}}
	}
	// lowerGBNF wants "root".
	rules["root"] = &gexpr{kind: gRef, name: "start"}
	order = append([]string{"root"}, order...)
	return lowerGBNF(rules, order)
}

func isTerminalName(n string) bool {
	t := strings.TrimLeft(n, "_")
	return t != "" && unicode.IsUpper(rune(t[0]))
}

// lspace skips blanks and // or # comments; newlines only when newlineOK,
// or when the next line continues the definition with "|".
func (p *larkParser) lspace(newlineOK bool) {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '#' || strings.HasPrefix(p.src[p.pos:], "//"):
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		case c == '\n' || c == '\r':
			if newlineOK {
				p.pos++
				continue
			}
			// Continuation line: whitespace then "|".
			j := p.pos
			for j < len(p.src) && (p.src[j] == '\n' || p.src[j] == '\r' || p.src[j] == ' ' || p.src[j] == '\t') {
				j++
			}
			if j < len(p.src) && p.src[j] == '|' {
				p.pos = j
				continue
			}
			return
		default:
			return
		}
	}
}

func (p *larkParser) directive(terms map[string]*gexpr) ([]*gexpr, error) {
	line := p.src[p.pos:]
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	p.pos += len(line)
	line = strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(line, "%import "):
		spec := strings.TrimSpace(strings.TrimPrefix(line, "%import "))
		var names []string
		alias := ""
		if i := strings.Index(spec, "("); i >= 0 && strings.HasSuffix(spec, ")") {
			if strings.TrimSpace(spec[:i]) != "common" {
				return nil, p.errorf("only %%import common is supported")
			}
			for _, n := range strings.Split(spec[i+1:len(spec)-1], ",") {
				names = append(names, strings.TrimSpace(n))
			}
		} else {
			mod, rest, _ := strings.Cut(spec, "->")
			alias = strings.TrimSpace(rest)
			mod = strings.TrimSpace(mod)
			if !strings.HasPrefix(mod, "common.") {
				return nil, p.errorf("only %%import common.X is supported")
			}
			names = []string{strings.TrimPrefix(mod, "common.")}
		}
		for _, n := range names {
			re, ok := larkCommon[n]
			if !ok {
				return nil, p.errorf("unknown common terminal %s", n)
			}
			as := n
			if alias != "" {
				as = alias
			}
			terms[as] = &gexpr{kind: gRegex, re: re}
		}
		return nil, nil
	case strings.HasPrefix(line, "%ignore "):
		sub := &larkParser{gbnfParser{src: strings.TrimPrefix(line, "%ignore ")}}
		e, err := sub.expansions()
		if err != nil {
			return nil, err
		}
		return []*gexpr{e}, nil
	}
	return nil, p.errorf("unsupported directive %q", line)
}

func (p *larkParser) expansions() (*gexpr, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxGBNFNesting {
		return nil, p.errorf("nested deeper than %d", maxGBNFNesting)
	}
	alt := &gexpr{kind: gAlt}
	for {
		s, err := p.lsequence()
		if err != nil {
			return nil, err
		}
		alt.subs = append(alt.subs, s)
		p.lspace(p.depth > 1)
		if p.pos < len(p.src) && p.src[p.pos] == '|' {
			p.pos++
			p.lspace(p.depth > 1)
			continue
		}
		break
	}
	if len(alt.subs) == 1 {
		return alt.subs[0], nil
	}
	return alt, nil
}

func (p *larkParser) lsequence() (*gexpr, error) {
	seq := &gexpr{kind: gSeq}
	nested := p.depth > 1
	for {
		p.lspace(nested)
		if p.pos >= len(p.src) {
			break
		}
		c := p.src[p.pos]
		var e *gexpr
		switch {
		case c == '"':
			s, err := p.literal()
			if err != nil {
				return nil, err
			}
			re := regexp.QuoteMeta(s)
			if strings.HasPrefix(p.src[p.pos:], "..") {
				p.pos += 2
				if p.pos >= len(p.src) || p.src[p.pos] != '"' {
					return nil, p.errorf("expected a literal after ..")
				}
				hi, err := p.literal()
				if err != nil {
					return nil, err
				}
				lr, hr := []rune(s), []rune(hi)
				if len(lr) != 1 || len(hr) != 1 || hr[0] < lr[0] {
					return nil, p.errorf("bad range %q..%q", s, hi)
				}
				re = fmt.Sprintf(`[\x{%x}-\x{%x}]`, lr[0], hr[0])
			} else if p.pos < len(p.src) && p.src[p.pos] == 'i' {
				p.pos++
				re = "(?i:" + re + ")"
			}
			e = &gexpr{kind: gRegex, re: re}
		case c == '/':
			re, err := p.regex()
			if err != nil {
				return nil, err
			}
			e = &gexpr{kind: gRegex, re: re}
		case c == '(' || c == '[':
			p.pos++
			p.lspace(true)
			inner, err := p.expansions()
			if err != nil {
				return nil, err
			}
			p.lspace(true)
			closer := byte(')')
			if c == '[' {
				closer = ']'
			}
			if p.pos >= len(p.src) || p.src[p.pos] != closer {
				return nil, p.errorf("expected %c", closer)
			}
			p.pos++
			e = inner
			if c == '[' {
				e = &gexpr{kind: gRepeat, subs: []*gexpr{inner}, min: 0, max: 1}
			}
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			// A name followed by ":" starts the next definition.
			save := p.pos
			n := p.name()
			j := p.pos
			if j < len(p.src) && p.src[j] == '.' {
				for j++; j < len(p.src) && p.src[j] >= '0' && p.src[j] <= '9'; j++ {
				}
			}
			for j < len(p.src) && (p.src[j] == ' ' || p.src[j] == '\t') {
				j++
			}
			if j < len(p.src) && p.src[j] == ':' {
				p.pos = save
				goto done
			}
			e = &gexpr{kind: gRef, name: n}
		default:
			goto done
		}
		if p.pos < len(p.src) {
			var err error
			if e, err = p.lpostfix(e); err != nil {
				return nil, err
			}
		}
		seq.subs = append(seq.subs, e)
	}
done:
	if len(seq.subs) == 1 {
		return seq.subs[0], nil
	}
	return seq, nil
}

func (p *larkParser) lpostfix(e *gexpr) (*gexpr, error) {
	c := p.src[p.pos]
	if m, n, ok := simpleRepeat(c); ok {
		p.pos++
		return repeatOf(e, m, n), nil
	}
	if c != '~' {
		return e, nil
	}
	p.pos++
	p.lspace(false)
	start := p.pos
	for p.pos < len(p.src) && (p.src[p.pos] >= '0' && p.src[p.pos] <= '9' || p.src[p.pos] == '.') {
		p.pos++
	}
	lo, hi, found := strings.Cut(p.src[start:p.pos], "..")
	m, n, ok := repeatBounds(lo, hi, found, false)
	if !ok {
		return nil, p.errorf("bad repetition ~ %s", p.src[start:p.pos])
	}
	return repeatOf(e, m, n), nil
}

// regex reads /pattern/flags.
func (p *larkParser) regex() (string, error) {
	p.pos++
	var sb strings.Builder
	for {
		if p.pos >= len(p.src) || p.src[p.pos] == '\n' {
			return "", p.errorf("unterminated regex")
		}
		c := p.src[p.pos]
		if c == '\\' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '/' {
			sb.WriteByte('/')
			p.pos += 2
			continue
		}
		if c == '\\' && p.pos+1 < len(p.src) {
			sb.WriteString(p.src[p.pos : p.pos+2])
			p.pos += 2
			continue
		}
		p.pos++
		if c == '/' {
			break
		}
		sb.WriteByte(c)
	}
	flags := ""
	for p.pos < len(p.src) && strings.IndexByte("imsulx", p.src[p.pos]) >= 0 {
		if f := p.src[p.pos]; f == 'i' || f == 's' {
			flags += string(f)
		} else {
			return "", p.errorf("unsupported regex flag %c", f)
		}
		p.pos++
	}
	re := sb.String()
	if _, err := ParseTerminal(re); err != nil {
		return "", p.errorf("%v", err)
	}
	if flags != "" {
		re = "(?" + flags + ":" + re + ")"
	}
	return re, nil
}
