package tokenizer

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/dlclark/regexp2/v2"
	"golang.org/x/text/unicode/norm"

	"github.com/sluice-llm/sluice/modelfile/tokfile"
)

// normStep is one normalizer.
type normStep func(string) string

// compileNormalizer flattens a tokenizer.json normalizer into steps.
func compileNormalizer(n *tokfile.Normalizer, path string) ([]normStep, error) {
	if n == nil {
		return nil, nil
	}
	switch n.Type {
	case "Sequence":
		var out []normStep
		for i, c := range n.Normalizers {
			s, err := compileNormalizer(c, fmt.Sprintf("%s.normalizers[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
		return out, nil
	case "NFC":
		return []normStep{normForm(norm.NFC)}, nil
	case "NFD":
		return []normStep{normForm(norm.NFD)}, nil
	case "NFKC":
		return []normStep{normForm(norm.NFKC)}, nil
	case "NFKD":
		return []normStep{normForm(norm.NFKD)}, nil
	case "Lowercase":
		return []normStep{strings.ToLower}, nil
	case "Prepend":
		p := n.Prepend
		return []normStep{func(s string) string {
			if s == "" {
				return s
			}
			return p + s
		}}, nil
	case "Replace":
		content := n.Content
		if !n.Pattern.IsRegex() {
			old := n.Pattern.String
			if old == "" {
				return nil, fmt.Errorf("field %s.pattern: empty", path)
			}
			return []normStep{func(s string) string { return strings.ReplaceAll(s, old, content) }}, nil
		}
		re, err := regexp2.Compile(n.Pattern.Regex, regexp2.Unicode)
		if err != nil {
			return nil, fmt.Errorf("field %s.pattern: %w", path, err)
		}
		return []normStep{func(s string) string {
			out, err := re.Replace(s, content, -1, -1)
			if err != nil {
				return s
			}
			return out
		}}, nil
	case "Strip":
		l, r := n.StripLeft, n.StripRight
		return []normStep{func(s string) string {
			if l {
				s = strings.TrimLeftFunc(s, unicode.IsSpace)
			}
			if r {
				s = strings.TrimRightFunc(s, unicode.IsSpace)
			}
			return s
		}}, nil
	}
	return nil, fmt.Errorf("field %s: unsupported normalizer type %q", path, n.Type)
}

func normForm(f norm.Form) normStep {
	return func(s string) string {
		if f.IsNormalString(s) {
			return s
		}
		return f.String(s)
	}
}

// preStep is one pre-tokenizer: it splits (and for Metaspace rewrites)
// each piece, appending the results to out.
type preStep interface {
	apply(piece string, first bool, sc *scratch, out []string) []string
}

type splitStep struct {
	sp       splitter
	behavior splitBehavior
	invert   bool
}

func (s splitStep) apply(piece string, _ bool, sc *scratch, out []string) []string {
	sc.spans = s.sp.matches(piece, sc.spans[:0])
	return applyBehavior(piece, sc.spans, s.behavior, s.invert, out)
}

// byteLevelStep is the ByteLevel pre-tokenizer's splitting part (the byte
// to unicode mapping happens in the model).
type byteLevelStep struct {
	addPrefixSpace bool
	useRegex       bool
}

func (b byteLevelStep) apply(piece string, _ bool, sc *scratch, out []string) []string {
	if b.addPrefixSpace && !strings.HasPrefix(piece, " ") {
		piece = " " + piece
	}
	if !b.useRegex {
		return append(out, piece)
	}
	sc.spans = familySplitter{familyGPT2}.matches(piece, sc.spans[:0])
	return applyBehavior(piece, sc.spans, behaviorIsolated, false, out)
}

// metaspaceStep replaces spaces with the replacement, prepends one per its
// scheme, and optionally splits before each replacement.
type metaspaceStep struct {
	repl    string
	prepend string // "always", "first", "never"
	split   bool
}

func (m metaspaceStep) apply(piece string, first bool, sc *scratch, out []string) []string {
	s := strings.ReplaceAll(piece, " ", m.repl)
	if (m.prepend == "always" || (m.prepend == "first" && first)) && !strings.HasPrefix(s, m.repl) {
		s = m.repl + s
	}
	if !m.split {
		return append(out, s)
	}
	sc.spans = literalSplitter{m.repl}.matches(s, sc.spans[:0])
	return applyBehavior(s, sc.spans, behaviorMergedWithNext, false, out)
}

type digitsStep struct{ individual bool }

func (d digitsStep) apply(piece string, _ bool, sc *scratch, out []string) []string {
	sc.spans = sc.spans[:0]
	for i := 0; i < len(piece); {
		_, c, n := runeAt(piece, i)
		if c&clsN == 0 {
			i += n
			continue
		}
		e := i + n
		if !d.individual {
			e = runOf(piece, e, clsN)
		}
		sc.spans = append(sc.spans, [2]int{i, e})
		i = e
	}
	return applyBehavior(piece, sc.spans, behaviorIsolated, false, out)
}

type whitespaceSplitStep struct{}

func (whitespaceSplitStep) apply(piece string, _ bool, _ *scratch, out []string) []string {
	return append(out, strings.Fields(piece)...)
}

// compilePreTokenizer flattens a tokenizer.json pre-tokenizer into steps,
// reporting whether it includes ByteLevel.
func compilePreTokenizer(p *tokfile.PreTokenizer, path string) ([]preStep, bool, error) {
	if p == nil {
		return nil, false, nil
	}
	switch p.Type {
	case "Sequence":
		var out []preStep
		byteLevel := false
		for i, c := range p.PreTokenizers {
			s, bl, err := compilePreTokenizer(c, fmt.Sprintf("%s.pretokenizers[%d]", path, i))
			if err != nil {
				return nil, false, err
			}
			out = append(out, s...)
			byteLevel = byteLevel || bl
		}
		return out, byteLevel, nil
	case "ByteLevel":
		if !p.AddPrefixSpace && !p.UseRegex {
			return nil, true, nil // mapping only
		}
		return []preStep{byteLevelStep{p.AddPrefixSpace, p.UseRegex}}, true, nil
	case "Split":
		sp, err := newSplitter(p.Pattern.Regex, p.Pattern.String)
		if err != nil {
			return nil, false, fmt.Errorf("field %s.pattern: %w", path, err)
		}
		b, err := parseBehavior(p.Behavior)
		if err != nil {
			return nil, false, fmt.Errorf("field %s.behavior: %w", path, err)
		}
		return []preStep{splitStep{sp, b, p.Invert}}, false, nil
	case "Metaspace":
		repl := p.Replacement
		if repl == "" {
			repl = "▁"
		}
		scheme := p.PrependScheme
		if scheme == "" {
			scheme = "never"
			if p.AddPrefixSpace {
				scheme = "always"
			}
		}
		switch scheme {
		case "always", "first", "never":
		default:
			return nil, false, fmt.Errorf("field %s.prepend_scheme: unknown %q", path, scheme)
		}
		return []preStep{metaspaceStep{repl, scheme, p.Split}}, false, nil
	case "Digits":
		return []preStep{digitsStep{p.IndividualDigits}}, false, nil
	case "WhitespaceSplit":
		return []preStep{whitespaceSplitStep{}}, false, nil
	}
	return nil, false, fmt.Errorf("field %s: unsupported pre_tokenizer type %q", path, p.Type)
}
