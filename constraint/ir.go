package constraint

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
)

// Symbol is one element of a grammar alternative: a terminal (an index into
// Grammar.Terminals) when non-negative, otherwise a reference to a rule.
type Symbol int32

// Term returns the symbol for terminal i.
func Term(i int) Symbol { return Symbol(i) }

// Ref returns the symbol referring to rule i.
func Ref(i int) Symbol { return Symbol(-i - 1) }

// IsTerminal reports whether s names a terminal.
func (s Symbol) IsTerminal() bool { return s >= 0 }

// Index returns the terminal or rule index s names.
func (s Symbol) Index() int {
	if s >= 0 {
		return int(s)
	}
	return int(-s - 1)
}

// Rule is a nonterminal: the language of any one of its alternatives. An
// empty alternative (nil or zero length) matches the empty string.
type Rule struct {
	Name string
	Alts [][]Symbol
}

// Grammar is the intermediate representation every constraint kind lowers
// to: a context-free grammar whose terminals are byte-level regular
// expressions in RE2 syntax (regexp/syntax, Perl flags), each matched as a
// whole (anchored at both ends, no empty-width assertions). The language of
// the grammar is the language of Rules[Start]; the output must be exactly
// one word of it, after which only EOS may follow.
//
// Terminals are lexemes only in name: the engine matches the grammar
// scannerlessly, so two adjacent terminals may split a string anywhere both
// accept. Left-recursive rules are rejected by the engine.
type Grammar struct {
	Terminals []string
	Rules     []Rule
	Start     int
}

// String renders the grammar in a GBNF-like form (terminals as /regex/),
// deterministic, for golden tests and debugging.
func (g *Grammar) String() string {
	var sb strings.Builder
	for i, r := range g.Rules {
		mark := ""
		if i == g.Start {
			mark = " (start)"
		}
		fmt.Fprintf(&sb, "%s%s ::=", r.Name, mark)
		for j, alt := range r.Alts {
			if j > 0 {
				sb.WriteString(" |")
			}
			if len(alt) == 0 {
				sb.WriteString(" ε")
			}
			for _, s := range alt {
				if s.IsTerminal() {
					fmt.Fprintf(&sb, " /%s/", g.Terminals[s.Index()])
				} else {
					fmt.Fprintf(&sb, " %s", g.Rules[s.Index()].Name)
				}
			}
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

// ParseTerminal parses a terminal pattern the way the engine does and
// rejects what a byte-level anchored automaton cannot express.
func ParseTerminal(pattern string) (*syntax.Regexp, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("parse terminal /%s/: %w", pattern, err)
	}
	if op := emptyWidthOp(re); op != "" {
		return nil, fmt.Errorf("terminal /%s/: unsupported assertion %s", pattern, op)
	}
	return re, nil
}

func emptyWidthOp(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		return "anchor " + re.String()
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return "word boundary " + re.String()
	}
	for _, s := range re.Sub {
		if op := emptyWidthOp(s); op != "" {
			return op
		}
	}
	return ""
}

// Validate checks that every terminal parses, every reference resolves and
// Start names a rule.
func (g *Grammar) Validate() error {
	if err := g.validateRefs(); err != nil {
		return err
	}
	for _, t := range g.Terminals {
		if _, err := ParseTerminal(t); err != nil {
			return fmt.Errorf("grammar: %w", err)
		}
	}
	return nil
}

// builder assembles a Grammar, deduplicating terminals.
type builder struct {
	g     Grammar
	terms map[string]int
	names map[string]int
}

func newBuilder() *builder {
	return &builder{terms: map[string]int{}, names: map[string]int{}}
}

// term returns the symbol of the terminal with this pattern.
func (b *builder) term(pattern string) Symbol {
	if i, ok := b.terms[pattern]; ok {
		return Term(i)
	}
	b.g.Terminals = append(b.g.Terminals, pattern)
	b.terms[pattern] = len(b.g.Terminals) - 1
	return Term(len(b.g.Terminals) - 1)
}

// lit returns a terminal matching exactly s.
func (b *builder) lit(s string) Symbol { return b.term(regexp.QuoteMeta(s)) }

// rule adds an empty rule with a unique name derived from name.
func (b *builder) rule(name string) int {
	n := b.names[name]
	b.names[name] = n + 1
	if n > 0 {
		name = fmt.Sprintf("%s_%d", name, n)
	}
	b.g.Rules = append(b.g.Rules, Rule{Name: name})
	return len(b.g.Rules) - 1
}

// define adds a rule with these alternatives and returns its symbol.
func (b *builder) define(name string, alts ...[]Symbol) Symbol {
	r := b.rule(name)
	b.g.Rules[r].Alts = alts
	return Ref(r)
}

// seq is shorthand for one alternative.
func seq(s ...Symbol) []Symbol { return s }

// nullableTerminals parses every terminal (rejecting what the engine
// cannot run) and reports which ones match the empty string.
func (g *Grammar) nullableTerminals() ([]bool, error) {
	out := make([]bool, len(g.Terminals))
	for i, t := range g.Terminals {
		re, err := ParseTerminal(t)
		if err != nil {
			return nil, fmt.Errorf("grammar: %w", err)
		}
		out[i] = nullableRE(re)
	}
	return out, nil
}

// nullableRE reports whether re matches the empty string.
func nullableRE(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpStar, syntax.OpQuest,
		syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	case syntax.OpLiteral:
		return len(re.Rune) == 0
	case syntax.OpPlus, syntax.OpCapture:
		return nullableRE(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min == 0 || nullableRE(re.Sub[0])
	case syntax.OpConcat:
		for _, s := range re.Sub {
			if !nullableRE(s) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		for _, s := range re.Sub {
			if nullableRE(s) {
				return true
			}
		}
		return false
	}
	return false // char classes, any char, no match
}

// validateRefs checks the start rule and every symbol index.
func (g *Grammar) validateRefs() error {
	if g.Start < 0 || g.Start >= len(g.Rules) {
		return fmt.Errorf("grammar: start rule %d out of range", g.Start)
	}
	for _, r := range g.Rules {
		for _, alt := range r.Alts {
			for _, s := range alt {
				if s.IsTerminal() && s.Index() >= len(g.Terminals) || !s.IsTerminal() && s.Index() >= len(g.Rules) {
					return fmt.Errorf("grammar: rule %s: symbol %d out of range", r.Name, s)
				}
			}
		}
	}
	return nil
}

// Check rejects grammars the engine cannot run: left recursion (direct or
// through nullable prefixes) and a start rule with no finite derivation.
// It also drops alternatives that can never finish (they reference rules
// without finite derivations), so the engine never walks into a dead end.
func (g *Grammar) Check() error {
	if err := g.validateRefs(); err != nil {
		return err
	}
	nullT, err := g.nullableTerminals()
	if err != nil {
		return err
	}
	// Productive rules: those with an alternative whose symbols are all
	// terminals or productive rules (worklist, linear time).
	prod := g.fixpoint(func(Symbol) bool { return true })
	if !prod[g.Start] {
		return fmt.Errorf("grammar: rule %s has no finite derivation", g.Rules[g.Start].Name)
	}
	for i := range g.Rules {
		alts := g.Rules[i].Alts[:0:0]
		for _, alt := range g.Rules[i].Alts {
			ok := true
			for _, s := range alt {
				if !s.IsTerminal() && !prod[s.Index()] {
					ok = false
				}
			}
			if ok {
				alts = append(alts, alt)
			}
		}
		g.Rules[i].Alts = alts
	}
	// Nullable rules: an alternative of nullable terminals and rules.
	null := g.fixpoint(func(s Symbol) bool { return nullT[s.Index()] })
	// Left-corner graph; a cycle is left recursion.
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, len(g.Rules))
	var visit func(i int) error
	visit = func(i int) error {
		color[i] = grey
		for _, alt := range g.Rules[i].Alts {
			for _, s := range alt {
				if !s.IsTerminal() {
					j := s.Index()
					switch color[j] {
					case grey:
						return fmt.Errorf("grammar: rule %s is left-recursive (through %s)", g.Rules[j].Name, g.Rules[i].Name)
					case white:
						if err := visit(j); err != nil {
							return err
						}
					}
					if !null[j] {
						break
					}
				} else if !nullT[s.Index()] {
					break
				}
			}
		}
		color[i] = black
		return nil
	}
	for i := range g.Rules {
		if color[i] == white {
			if err := visit(i); err != nil {
				return err
			}
		}
	}
	return nil
}

// fixpoint returns, for every rule, whether some alternative consists of
// terminals satisfying term and rules already in the set (the least
// fixpoint), with a worklist in time linear in the grammar size.
func (g *Grammar) fixpoint(term func(Symbol) bool) []bool {
	in := make([]bool, len(g.Rules))
	type altRef struct{ rule, alt int }
	// missing[rule][alt]: symbols of the alternative not yet satisfied.
	missing := make([][]int, len(g.Rules))
	users := make([][]altRef, len(g.Rules))
	var queue []int
	for i, r := range g.Rules {
		missing[i] = make([]int, len(r.Alts))
		for j, alt := range r.Alts {
			ok := true
			for _, s := range alt {
				if s.IsTerminal() {
					if !term(s) {
						ok = false
					}
					continue
				}
				missing[i][j]++
				users[s.Index()] = append(users[s.Index()], altRef{i, j})
			}
			if !ok {
				missing[i][j] = -1 // never satisfiable
			}
			if missing[i][j] == 0 && !in[i] {
				in[i] = true
				queue = append(queue, i)
			}
		}
	}
	for len(queue) > 0 {
		r := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, u := range users[r] {
			if missing[u.rule][u.alt] <= 0 {
				continue
			}
			missing[u.rule][u.alt]--
			if missing[u.rule][u.alt] == 0 && !in[u.rule] {
				in[u.rule] = true
				queue = append(queue, u.rule)
			}
		}
	}
	return in
}
