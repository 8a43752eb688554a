package tokenizer

import (
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/sluice-llm/sluice/modelfile/tokfile"
)

// HarmonyVocabSize is the vocabulary size of o200k_harmony (gpt-oss): the
// o200k_base ranks, the harmony special tokens and reserved ids up to here.
const HarmonyVocabSize = 201088

// HarmonySpecialTokens returns the special tokens that o200k_harmony adds to
// o200k_base, as gpt-oss's reference tokenizer (gpt_oss/tokenizer.py) and
// tiktoken define them: <|startoftext|>, <|endoftext|>, the harmony markup
// tokens and <|reserved_N|> for every other id from 200000 to 201087.
// (o200k_base's <|endofprompt|>, 200018, stays as well: id 200018 has both
// names.)
func HarmonySpecialTokens() map[string]int {
	sp := map[string]int{
		"<|startoftext|>": 199998,
		"<|endoftext|>":   199999,
		"<|return|>":      200002,
		"<|constrain|>":   200003,
		"<|channel|>":     200005,
		"<|start|>":       200006,
		"<|end|>":         200007,
		"<|message|>":     200008,
		"<|call|>":        200012,
	}
	for _, id := range []int{200000, 200001, 200004, 200009, 200010, 200011} {
		sp[fmt.Sprintf("<|reserved_%d|>", id)] = id
	}
	for id := 200013; id < HarmonyVocabSize; id++ {
		sp[fmt.Sprintf("<|reserved_%d|>", id)] = id
	}
	return sp
}

// TiktokenOptions adjust a tokenizer built from a tiktoken encoding.
type TiktokenOptions struct {
	// Special adds (or renames) special tokens on top of the file's.
	Special map[string]int
	// VocabSize pads the vocabulary to this many ids (0: just what the
	// ranks and special tokens need).
	VocabSize int
	// EOS lists the ids that end generation, the first being EOS(); empty
	// means <|endoftext|> when the encoding has it.
	EOS []int32
	// Pattern is the split regex used when the file gives none (a plain
	// .tiktoken file has no pat_str).
	Pattern string
}

// LoadTiktoken loads a tiktoken encoding file (see tokfile.ReadTiktoken).
func LoadTiktoken(path string, o TiktokenOptions) (*Model, error) {
	tk, err := tokfile.ReadTiktoken(path)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	m, err := FromTiktoken(tk, o)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
	}
	m.info.Source = path
	return m, nil
}

// LoadO200kHarmony loads o200k_base's rank file and adds gpt-oss's harmony
// special tokens, giving o200k_harmony. Generation ends on gpt-oss's
// generation_config.json ids: <|return|> (EOS()), <|endoftext|>, <|call|>.
func LoadO200kHarmony(path string) (*Model, error) {
	return LoadTiktoken(path, TiktokenOptions{
		Special:   HarmonySpecialTokens(),
		VocabSize: HarmonyVocabSize,
		EOS:       []int32{200002, 199999, 200012},
		Pattern:   PatternO200k,
	})
}

// FromTiktoken builds a byte-level BPE tokenizer from a tiktoken encoding.
//
// tiktoken merges, within each pre-token, the adjacent pair whose
// concatenation has the lowest rank (leftmost among equals) until no
// concatenation is a token. That is byte-level BPE with one merge per way
// of cutting each token into two tokens, ranked by the token's own rank —
// the table Hugging Face's tiktoken converter writes — so the ranked-merge
// machinery runs it exactly. Token texts are kept in the byte-level
// alphabet, as in the same vocabulary's tokenizer.json.
func FromTiktoken(tk *tokfile.Tiktoken, o TiktokenOptions) (*Model, error) {
	if tk.Pattern == "" {
		tk.Pattern = o.Pattern
	}
	if tk.Pattern == "" {
		return nil, fmt.Errorf("field pat_str: missing (a plain .tiktoken file needs the encoding's pattern)")
	}
	sp, err := newSplitter(tk.Pattern, "")
	if err != nil {
		return nil, fmt.Errorf("field pat_str: %w", err)
	}
	special := make(map[string]int, len(tk.Special)+len(o.Special))
	for k, v := range tk.Special {
		special[k] = v
	}
	for k, v := range o.Special {
		special[k] = v
	}
	size := max(len(tk.Ranks), o.VocabSize)
	for tok, id := range special {
		if id < 0 || id >= 1<<24 {
			return nil, fmt.Errorf("special token %q: id %d out of range", tok, id)
		}
		if id < len(tk.Ranks) && tk.Ranks[id] != nil {
			return nil, fmt.Errorf("special token %q: id %d is also a rank", tok, id)
		}
		size = max(size, id+1)
	}
	m := &Model{kind: kindByteLevel, unk: -1, bos: -1, eos: -1}
	m.pre = []preStep{splitStep{sp: sp, behavior: behaviorIsolated}}
	m.vocab = make([]string, size)
	m.pieces = make([][]byte, size)
	m.special = make([]bool, size)
	m.ids = make(map[string]int32, len(tk.Ranks))
	for r, b := range tk.Ranks {
		if b == nil {
			continue
		}
		tok := byteLevelString(b)
		m.vocab[r], m.pieces[r] = tok, b
		m.ids[tok] = int32(r)
	}
	m.setByteTokens()
	for b, id := range m.byteTok {
		if id < 0 {
			return nil, fmt.Errorf("field bpe_ranks: no token for byte %#02x", b)
		}
	}
	m.buildTiktokenMerges(tk.Ranks)

	// Special tokens, canonical names first so that an id with two names
	// (o200k_harmony's 200018) decodes as the encoding's own name.
	names := make([]string, 0, len(special))
	for tok := range special {
		names = append(names, tok)
	}
	sort.Slice(names, func(i, j int) bool {
		_, bi := tk.Special[names[i]]
		_, bj := tk.Special[names[j]]
		if bi != bj {
			return bi
		}
		return names[i] < names[j]
	})
	m.added = newAddedMatcher()
	m.addedText = make(map[string]int32, len(special))
	for _, tok := range names {
		id := int32(special[tok])
		if m.vocab[id] == "" {
			m.vocab[id], m.pieces[id] = tok, []byte(tok)
		}
		m.special[id] = true
		m.addedText[tok] = id
		m.added.add(tok, addedToken{id: id, special: true})
	}
	for id := range m.vocab { // ids no rank or special token names
		if m.pieces[id] == nil {
			m.special[id] = true
		}
	}

	eos := o.EOS
	if len(eos) == 0 {
		if id, ok := special["<|endoftext|>"]; ok {
			eos = []int32{int32(id)}
		}
	}
	var extra []int
	for i, id := range eos {
		if id < 0 || int(id) >= size {
			return nil, fmt.Errorf("eos id %d out of range", id)
		}
		if i == 0 {
			m.eos = id
		} else {
			extra = append(extra, int(id))
		}
	}
	m.finishInfo(extra, -1)
	m.cache = newPieceCache()
	return m, nil
}

// buildTiktokenMerges indexes, for every token, each cut into two tokens as
// a merge ranked by the token's rank. Tokens are found by a polynomial hash
// of their bytes (each cut's two hashes follow from the prefix hashes in
// O(1)), every hit confirmed byte for byte; the string-keyed map is only
// the fallback should two tokens ever share a hash.
func (m *Model) buildTiktokenMerges(ranks [][]byte) {
	const prime = 1099511628211
	hash := func(b []byte) uint64 {
		var h uint64
		for _, c := range b {
			h = h*prime + uint64(c) + 1
		}
		return h
	}
	byHash := make(map[uint64]int32, len(ranks))
	collide := false
	for r, b := range ranks {
		if b == nil {
			continue
		}
		h := hash(b)
		if _, dup := byHash[h]; dup {
			collide = true
		}
		byHash[h] = int32(r)
	}
	find := func(h uint64, want []byte) (int32, bool) {
		if id, ok := byHash[h]; ok && string(ranks[id]) == string(want) {
			return id, true
		}
		if collide {
			id, ok := m.ids[byteLevelString(want)]
			return id, ok
		}
		return 0, false
	}
	m.merges = make(map[uint64]merge, len(ranks)*5/2)
	var pre, pow []uint64
	for r, b := range ranks {
		if len(b) < 2 {
			continue
		}
		pre, pow = append(pre[:0], 0), append(pow[:0], 1)
		for _, c := range b {
			pre = append(pre, pre[len(pre)-1]*prime+uint64(c)+1)
			pow = append(pow, pow[len(pow)-1]*prime)
		}
		n := len(b)
		for k := 1; k < n; k++ {
			a, ok := find(pre[k], b[:k])
			if !ok {
				continue
			}
			c, ok := find(pre[n]-pre[k]*pow[n-k], b[k:])
			if !ok {
				continue
			}
			m.merges[pairKey(a, c)] = merge{rank: int32(r), id: int32(r)}
		}
	}
}

// byteLevelString maps raw bytes to GPT-2's byte-level alphabet.
func byteLevelString(b []byte) string { return string(appendByteLevel(nil, b)) }

func appendByteLevel(dst, b []byte) []byte {
	for _, c := range b {
		dst = utf8.AppendRune(dst, byteToRune[c])
	}
	return dst
}
