package constraint

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// gexpr is a parsed GBNF expression.
type gexpr struct {
	kind     gkind
	subs     []*gexpr
	name     string // gRef
	re       string // gRegex: an RE2 pattern
	min, max int    // gRepeat; max < 0 is unbounded
}

type gkind uint8

const (
	gAlt gkind = iota
	gSeq
	gRef
	gRegex
	gRepeat
)

// maxGBNFNesting bounds parenthesis nesting in grammar text.
const maxGBNFNesting = 100

// gbnfParser is a recursive-descent reader of llama.cpp's GBNF.
type gbnfParser struct {
	src   string
	pos   int
	depth int
}

func (p *gbnfParser) errorf(format string, args ...any) error {
	line := 1 + strings.Count(p.src[:p.pos], "\n")
	return fmt.Errorf("gbnf: line %d: %s", line, fmt.Sprintf(format, args...))
}

// space skips blanks and comments; newlines only when newlineOK.
func (p *gbnfParser) space(newlineOK bool) {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		case (c == '\n' || c == '\r') && newlineOK:
			p.pos++
		default:
			return
		}
	}
}

func isNameChar(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (p *gbnfParser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isNameChar(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// ParseGBNF reads a grammar in llama.cpp's GBNF and lowers it to the IR
// (start rule "root"). Regular sub-expressions become single terminals.
func ParseGBNF(text string) (*Grammar, error) {
	p := &gbnfParser{src: text}
	rules := map[string]*gexpr{}
	var order []string
	for {
		p.space(true)
		if p.pos >= len(p.src) {
			break
		}
		name := p.name()
		if name == "" {
			return nil, p.errorf("expected a rule name, found %q", p.rest())
		}
		p.space(false)
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			return nil, p.errorf("expected ::= after %s", name)
		}
		p.pos += 3
		p.space(true)
		e, err := p.alternates()
		if err != nil {
			return nil, err
		}
		if _, dup := rules[name]; dup {
			return nil, p.errorf("rule %s defined twice", name)
		}
		rules[name] = e
		order = append(order, name)
		p.space(false)
		if p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
			return nil, p.errorf("unexpected %q", p.rest())
		}
	}
	if rules["root"] == nil {
		return nil, fmt.Errorf("gbnf: no root rule")
	}
	return lowerGBNF(rules, order)
}

func (p *gbnfParser) rest() string {
	r := p.src[p.pos:]
	if len(r) > 20 {
		r = r[:20]
	}
	return r
}

func (p *gbnfParser) alternates() (*gexpr, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxGBNFNesting {
		return nil, p.errorf("nested deeper than %d", maxGBNFNesting)
	}
	alt := &gexpr{kind: gAlt}
	for {
		s, err := p.sequence()
		if err != nil {
			return nil, err
		}
		alt.subs = append(alt.subs, s)
		if p.pos < len(p.src) && p.src[p.pos] == '|' {
			p.pos++
			p.space(true)
			continue
		}
		break
	}
	if len(alt.subs) == 1 {
		return alt.subs[0], nil
	}
	return alt, nil
}

func (p *gbnfParser) sequence() (*gexpr, error) {
	seq := &gexpr{kind: gSeq}
	nested := p.depth > 1
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		var e *gexpr
		switch {
		case c == '"':
			s, err := p.literal()
			if err != nil {
				return nil, err
			}
			e = &gexpr{kind: gRegex, re: regexp.QuoteMeta(s)}
		case c == '[':
			re, err := p.class()
			if err != nil {
				return nil, err
			}
			e = &gexpr{kind: gRegex, re: re}
		case c == '.':
			p.pos++
			e = &gexpr{kind: gRegex, re: `(?s:.)`}
		case c == '(':
			p.pos++
			p.space(true)
			inner, err := p.alternates()
			if err != nil {
				return nil, err
			}
			p.space(true)
			if p.pos >= len(p.src) || p.src[p.pos] != ')' {
				return nil, p.errorf("expected )")
			}
			p.pos++
			e = inner
		case isNameChar(c):
			// A name followed by ::= starts the next rule.
			save := p.pos
			n := p.name()
			p.space(false)
			if strings.HasPrefix(p.src[p.pos:], "::=") {
				p.pos = save
				goto done
			}
			p.pos = save + len(n)
			e = &gexpr{kind: gRef, name: n}
		default:
			goto done
		}
		p.space(nested)
		if p.pos < len(p.src) {
			var err error
			if e, err = p.postfix(e); err != nil {
				return nil, err
			}
		}
		seq.subs = append(seq.subs, e)
		p.space(nested)
	}
done:
	if len(seq.subs) == 1 {
		return seq.subs[0], nil
	}
	return seq, nil
}

func (p *gbnfParser) postfix(e *gexpr) (*gexpr, error) {
	c := p.src[p.pos]
	if m, n, ok := simpleRepeat(c); ok {
		p.pos++
		return repeatOf(e, m, n), nil
	}
	if c != '{' {
		return e, nil
	}
	end := strings.IndexByte(p.src[p.pos:], '}')
	if end < 0 {
		return nil, p.errorf("unterminated {")
	}
	body := strings.TrimSpace(p.src[p.pos+1 : p.pos+end])
	p.pos += end + 1
	lo, hi, found := strings.Cut(body, ",")
	m, n, ok := repeatBounds(strings.TrimSpace(lo), strings.TrimSpace(hi), found, true)
	if !ok {
		return nil, p.errorf("bad repetition {%s}", body)
	}
	return repeatOf(e, m, n), nil
}

// escape reads one possibly escaped character.
func (p *gbnfParser) char() (rune, error) {
	if p.pos >= len(p.src) {
		return 0, p.errorf("unexpected end")
	}
	if p.src[p.pos] != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		if r == utf8.RuneError && n <= 1 {
			return 0, p.errorf("invalid UTF-8")
		}
		p.pos += n
		return r, nil
	}
	p.pos++
	if p.pos >= len(p.src) {
		return 0, p.errorf("unterminated escape")
	}
	c := p.src[p.pos]
	p.pos++
	hex := 0
	switch c {
	case 'n':
		return '\n', nil
	case 't':
		return '\t', nil
	case 'r':
		return '\r', nil
	case '\\', '"', '[', ']', '-', '^', '/':
		return rune(c), nil
	case 'x':
		hex = 2
	case 'u':
		hex = 4
	case 'U':
		hex = 8
	default:
		return 0, p.errorf("unknown escape \\%c", c)
	}
	if p.pos+hex > len(p.src) {
		return 0, p.errorf("short \\%c escape", c)
	}
	v, err := strconv.ParseUint(p.src[p.pos:p.pos+hex], 16, 32)
	if err != nil || v > utf8.MaxRune || v >= 0xD800 && v <= 0xDFFF {
		return 0, p.errorf("bad \\%c escape", c)
	}
	p.pos += hex
	return rune(v), nil
}

func (p *gbnfParser) literal() (string, error) {
	p.pos++ // opening quote
	var sb strings.Builder
	for {
		if p.pos >= len(p.src) || p.src[p.pos] == '\n' {
			return "", p.errorf("unterminated string")
		}
		if p.src[p.pos] == '"' {
			p.pos++
			return sb.String(), nil
		}
		r, err := p.char()
		if err != nil {
			return "", err
		}
		sb.WriteRune(r)
	}
}

func (p *gbnfParser) class() (string, error) {
	p.pos++ // [
	var sb strings.Builder
	sb.WriteByte('[')
	if p.pos < len(p.src) && p.src[p.pos] == '^' {
		sb.WriteByte('^')
		p.pos++
	}
	n := 0
	for {
		if p.pos >= len(p.src) || p.src[p.pos] == '\n' {
			return "", p.errorf("unterminated [")
		}
		if p.src[p.pos] == ']' {
			p.pos++
			break
		}
		lo, err := p.char()
		if err != nil {
			return "", err
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			if hi, err = p.char(); err != nil {
				return "", err
			}
			if hi < lo {
				return "", p.errorf("bad range in class")
			}
		}
		fmt.Fprintf(&sb, `\x{%x}-\x{%x}`, lo, hi)
		n++
	}
	if n == 0 {
		return "", p.errorf("empty character class")
	}
	sb.WriteByte(']')
	return sb.String(), nil
}

// gbnfLowerer turns expressions into IR rules.
type gbnfLowerer struct {
	b     *builder
	rules map[string]*gexpr
	index map[string]int
}

func lowerGBNF(rules map[string]*gexpr, order []string) (*Grammar, error) {
	l := &gbnfLowerer{b: newBuilder(), rules: rules, index: map[string]int{}}
	for _, n := range order {
		l.index[n] = l.b.rule(n)
	}
	if err := l.checkRefs(); err != nil {
		return nil, err
	}
	for _, n := range order {
		alts, err := l.alts(rules[n])
		if err != nil {
			return nil, err
		}
		l.b.g.Rules[l.index[n]].Alts = alts
	}
	l.b.g.Start = l.index["root"]
	return &l.b.g, nil
}

func (l *gbnfLowerer) checkRefs() error {
	var walk func(e *gexpr) error
	walk = func(e *gexpr) error {
		if e.kind == gRef {
			if _, ok := l.index[e.name]; !ok {
				return fmt.Errorf("gbnf: undefined rule %s", e.name)
			}
		}
		for _, s := range e.subs {
			if err := walk(s); err != nil {
				return err
			}
		}
		return nil
	}
	for _, e := range l.rules {
		if err := walk(e); err != nil {
			return err
		}
	}
	return nil
}

func regular(e *gexpr) bool {
	if e.kind == gRef {
		return false
	}
	for _, s := range e.subs {
		if !regular(s) {
			return false
		}
	}
	return true
}

// toRegex renders a regular expression tree as one RE2 pattern.
func toRegex(e *gexpr) string {
	switch e.kind {
	case gRegex:
		return e.re
	case gSeq:
		var sb strings.Builder
		for _, s := range e.subs {
			sb.WriteString("(?:" + toRegex(s) + ")")
		}
		return sb.String()
	case gAlt:
		parts := make([]string, len(e.subs))
		for i, s := range e.subs {
			parts[i] = toRegex(s)
		}
		return "(?:" + strings.Join(parts, "|") + ")"
	case gRepeat:
		in := "(?:" + toRegex(e.subs[0]) + ")"
		switch {
		case e.max < 0 && e.min == 0:
			return in + "*"
		case e.max < 0 && e.min == 1:
			return in + "+"
		case e.max < 0:
			return fmt.Sprintf("%s{%d,}", in, e.min)
		case e.min == 0 && e.max == 1:
			return in + "?"
		}
		return fmt.Sprintf("%s{%d,%d}", in, e.min, e.max)
	}
	return ""
}

func (l *gbnfLowerer) alts(e *gexpr) ([][]Symbol, error) {
	if e.kind == gAlt && !regular(e) {
		var out [][]Symbol
		for _, s := range e.subs {
			seq, err := l.seq(s)
			if err != nil {
				return nil, err
			}
			out = append(out, seq)
		}
		return out, nil
	}
	seq, err := l.seq(e)
	if err != nil {
		return nil, err
	}
	return [][]Symbol{seq}, nil
}

func (l *gbnfLowerer) seq(e *gexpr) ([]Symbol, error) {
	subs := []*gexpr{e}
	if e.kind == gSeq {
		subs = e.subs
	}
	var out []Symbol
	var run []string
	flush := func() {
		if re := strings.Join(run, ""); re != "" && re != "(?:)" {
			out = append(out, l.b.term(re))
		}
		run = nil
	}
	for _, s := range subs {
		if regular(s) {
			if re := toRegex(s); re != "" {
				run = append(run, "(?:"+re+")")
			}
			continue
		}
		flush()
		sym, err := l.sym(s)
		if err != nil {
			return nil, err
		}
		out = append(out, sym)
	}
	flush()
	return out, nil
}

func (l *gbnfLowerer) sym(e *gexpr) (Symbol, error) {
	switch e.kind {
	case gRef:
		return Ref(l.index[e.name]), nil
	case gAlt, gSeq:
		alts, err := l.alts(e)
		if err != nil {
			return 0, err
		}
		return l.b.define("group", alts...), nil
	case gRepeat:
		inner, err := l.seq(e.subs[0])
		if err != nil {
			return 0, err
		}
		// The tail after min copies: star, or nested optionals.
		var tail []Symbol
		if e.max < 0 {
			r := l.b.rule("star")
			l.b.g.Rules[r].Alts = [][]Symbol{append(append([]Symbol{}, inner...), Ref(r)), nil}
			tail = []Symbol{Ref(r)}
		} else {
			for i := e.max - e.min; i > 0; i-- {
				opt := l.b.define("opt", append(append([]Symbol{}, inner...), tail...), nil)
				tail = []Symbol{opt}
			}
		}
		var body []Symbol
		for range e.min {
			body = append(body, inner...)
		}
		body = append(body, tail...)
		return l.b.define("repeat", body), nil
	}
	return l.b.term(toRegex(e)), nil
}
