package tokenizer

import (
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// modelKind selects the merge algorithm and the symbol alphabet.
type modelKind uint8

const (
	// kindByteLevel: GPT-2-style byte-level BPE with ranked merges.
	kindByteLevel modelKind = iota
	// kindRank: character BPE with ranked merges and byte fallback
	// (tokenizer.json files of Llama-2/Mistral style).
	kindRank
	// kindScore: SentencePiece BPE with merges by token score
	// (GGUF "llama" vocabularies, llama2.c tokenizer.bin).
	kindScore
)

// spaceSym is SentencePiece's visible space, "▁" (U+2581).
const spaceSym = "\u2581"

// Options control one encoding.
type Options struct {
	// AddSpecial adds what the post-processor adds (e.g. BOS).
	AddSpecial bool
	// ParseSpecial matches special tokens written literally in the text.
	// When false, only non-special added tokens are matched and text such
	// as "<|im_end|>" is tokenized as plain text (llama.cpp's
	// parse_special=false, HF's split_special_tokens=True).
	ParseSpecial bool
}

// Model is a BPE tokenizer (byte-level, character-level with byte fallback,
// or SentencePiece-style by score). It implements Tokenizer and is safe for
// concurrent use.
type Model struct {
	kind   modelKind
	vocab  []string         // id → token text as the vocabulary writes it
	ids    map[string]int32 // model vocabulary text → id
	pieces [][]byte         // id → TokenBytes; never written after load (TokenString shares them)
	// special marks control tokens (skipped by Decode with skipSpecial).
	special []bool
	scores  []float32        // kindScore: per-token score
	merges  map[uint64]merge // kindByteLevel, kindRank: pair → merge
	byteTok [256]int32       // byte → its token (byte-level char or <0xNN>), -1 if none
	unk     int32

	byteFallback, fuseUnk, ignoreMerges bool

	norm []normStep
	pre  []preStep
	// kindScore (llama.cpp SPM) settings.
	addSpacePrefix bool // prefix " " to text at the start or after a special token
	escapeSpaces   bool // replace " " with "▁" before merging
	// chunkOnSpace: no token has "▁" after a non-"▁" byte, so text can be
	// cut before every such "▁" without changing the result.
	chunkOnSpace bool
	// stripLeadingSpace: Decode drops one leading space of the first piece.
	stripLeadingSpace bool

	added          *addedMatcher
	addedText      map[string]int32 // literal added-token text → id
	prefix, suffix []int32          // added by AddSpecial
	bos, eos       int32
	info           Info

	cache *pieceCache
	pool  sync.Pool // *scratch
}

// scratch is per-call working memory, reused through Model.pool.
type scratch struct {
	segs   []segment
	levels [][]string // pieces per pre-tokenizer level
	spans  [][2]int
	syms   []int32
	ranks  []int32
	heap   []rankEntry
	spm    []spmSym
	scores []float32
	buf    []byte
	key    []byte
}

func (m *Model) getScratch() *scratch {
	if sc, ok := m.pool.Get().(*scratch); ok {
		return sc
	}
	return &scratch{}
}

// Encode implements Tokenizer: special tokens in text are matched.
func (m *Model) Encode(text string, addSpecial bool) []int32 {
	return m.EncodeWith(text, Options{AddSpecial: addSpecial, ParseSpecial: true})
}

// EncodeWith encodes text with explicit options.
func (m *Model) EncodeWith(text string, o Options) []int32 {
	return m.AppendEncode(make([]int32, 0, len(text)/3+4), text, o)
}

// AppendEncode appends the ids of text to dst and returns it. With a dst of
// enough capacity it allocates nothing once the piece cache is warm.
func (m *Model) AppendEncode(dst []int32, text string, o Options) []int32 {
	if o.AddSpecial {
		dst = append(dst, m.prefix...)
	}
	sc := m.getScratch()
	sc.segs = m.added.split(text, o.ParseSpecial, sc.segs[:0])
	prevSpecial := true
	for k, sg := range sc.segs {
		if sg.id >= 0 {
			dst = append(dst, sg.id)
			prevSpecial = true
			continue
		}
		first := k == 0
		dst = m.encodeText(sc, sg.text, first, prevSpecial, dst)
		prevSpecial = false
	}
	clear(sc.segs) // drop references to text before pooling
	m.pool.Put(sc)
	if o.AddSpecial {
		dst = append(dst, m.suffix...)
	}
	return dst
}

// encodeText encodes a segment with no added tokens in it.
func (m *Model) encodeText(sc *scratch, text string, first, prevSpecial bool, out []int32) []int32 {
	if m.kind == kindScore {
		return m.encodeSPM(sc, text, prevSpecial, out)
	}
	for _, n := range m.norm {
		text = n(text)
	}
	if text == "" {
		return out
	}
	return m.preEncode(sc, 0, text, first, out)
}

// preEncode runs pre-tokenizer steps level.. on piece depth-first and
// encodes the resulting pre-tokens, so that no list of all the pieces of a
// long text is ever built. Hand-written Isolated splits are streamed.
func (m *Model) preEncode(sc *scratch, level int, piece string, first bool, out []int32) []int32 {
	if level == len(m.pre) {
		return m.encodeWord(sc, piece, out)
	}
	if st, ok := m.pre[level].(splitStep); ok && st.behavior == behaviorIsolated && !st.invert {
		if fs, ok := st.sp.(familySplitter); ok {
			prev := 0
			for i := 0; i < len(piece); {
				e := fs.f.matchAt(piece, i)
				if e < 0 {
					_, _, n := runeAt(piece, i)
					i += n
					continue
				}
				if i > prev {
					out = m.preEncode(sc, level+1, piece[prev:i], first && prev == 0, out)
				}
				out = m.preEncode(sc, level+1, piece[i:e], first && i == 0, out)
				i, prev = e, e
			}
			if prev < len(piece) {
				out = m.preEncode(sc, level+1, piece[prev:], first && prev == 0, out)
			}
			return out
		}
	}
	for len(sc.levels) <= level {
		sc.levels = append(sc.levels, nil)
	}
	pieces := m.pre[level].apply(piece, first, sc, sc.levels[level][:0])
	sc.levels[level] = pieces
	for k := 0; k < len(pieces); k++ {
		out = m.preEncode(sc, level+1, pieces[k], first && k == 0, out)
	}
	sc.levels[level] = pieces[:0]
	return out
}

// encodeWord encodes one pre-token (cut into chunks before "▁" when that is
// exact).
func (m *Model) encodeWord(sc *scratch, p string, out []int32) []int32 {
	if m.kind == kindRank && m.chunkOnSpace {
		for start := 0; start < len(p); {
			end := nextSpaceChunk(p, start)
			out = m.encodePiece(sc, p[start:end], out)
			start = end
		}
		return out
	}
	if p != "" {
		out = m.encodePiece(sc, p, out)
	}
	return out
}

// nextSpaceChunk returns the end of the chunk of s that starts at start:
// chunks are cut before each "▁" (E2 96 81) whose preceding rune is not "▁".
func nextSpaceChunk[T string | []byte](s T, start int) int {
	for i := start; i < len(s); {
		if s[i] == 0xE2 && i+2 < len(s) && s[i+1] == 0x96 && s[i+2] == 0x81 {
			if i > start && !(i >= 3 && s[i-3] == 0xE2 && s[i-2] == 0x96 && s[i-1] == 0x81) {
				return i
			}
			i += 3
			continue
		}
		i++
	}
	return len(s)
}

// encodePiece runs the model on one pre-token, through the cache.
func (m *Model) encodePiece(sc *scratch, p string, out []int32) []int32 {
	if len(p) == 1 && m.kind == kindByteLevel {
		return append(out, m.byteTok[p[0]]) // a lone byte never merges
	}
	sc.key = append(sc.key[:0], p...)
	if ids, ok := m.cache.get(sc.key); ok {
		return append(out, ids...)
	}
	start := len(out)
	switch m.kind {
	case kindByteLevel:
		out = m.bpeByteLevel(sc, p, out)
	case kindRank:
		out = m.bpeChars(sc, p, out)
	}
	m.cache.put(sc.key, out[start:])
	return out
}

// bpeByteLevel tokenizes one pre-token of a byte-level BPE.
func (m *Model) bpeByteLevel(sc *scratch, p string, out []int32) []int32 {
	if m.ignoreMerges {
		buf := sc.buf[:0]
		for i := 0; i < len(p); i++ {
			buf = utf8.AppendRune(buf, byteToRune[p[i]])
		}
		sc.buf = buf
		if id, ok := m.ids[string(buf)]; ok {
			return append(out, id)
		}
	}
	syms := sc.syms[:0]
	for i := 0; i < len(p); i++ {
		id := m.byteTok[p[i]]
		if id < 0 {
			id = m.unk
		}
		syms = append(syms, id)
	}
	syms = m.bpeRank(sc, syms)
	sc.syms = syms[:0]
	return append(out, syms...)
}

// bpeChars tokenizes one pre-token of a character-level BPE (with byte
// fallback and unk as the file says).
func (m *Model) bpeChars(sc *scratch, p string, out []int32) []int32 {
	if m.ignoreMerges {
		if id, ok := m.ids[p]; ok {
			return append(out, id)
		}
	}
	syms := sc.syms[:0]
	prevUnk := false
	for i := 0; i < len(p); {
		_, n := utf8.DecodeRuneInString(p[i:])
		ch := p[i : i+n]
		i += n
		if id, ok := m.ids[ch]; ok {
			syms = append(syms, id)
			prevUnk = false
			continue
		}
		if m.byteFallback {
			ok := true
			for k := 0; k < len(ch); k++ {
				ok = ok && m.byteTok[ch[k]] >= 0
			}
			if ok {
				for k := 0; k < len(ch); k++ {
					syms = append(syms, m.byteTok[ch[k]])
				}
				prevUnk = false
				continue
			}
		}
		if m.unk >= 0 && !(m.fuseUnk && prevUnk) {
			syms = append(syms, m.unk)
		}
		prevUnk = true
	}
	syms = m.bpeRank(sc, syms)
	sc.syms = syms[:0]
	return append(out, syms...)
}

// encodeSPM is llama.cpp's SentencePiece path: optional space prefix,
// spaces to "▁", then score merges (chunked and cached when that is exact).
func (m *Model) encodeSPM(sc *scratch, text string, prevSpecial bool, out []int32) []int32 {
	buf := sc.buf[:0]
	if m.addSpacePrefix && prevSpecial {
		buf = append(buf, spaceSym...)
	}
	for i := 0; i < len(text); i++ {
		if text[i] == ' ' && m.escapeSpaces {
			buf = append(buf, spaceSym...)
		} else {
			buf = append(buf, text[i])
		}
	}
	sc.buf = buf
	if !m.chunkOnSpace {
		return m.bpeScore(sc, buf, out)
	}
	for start := 0; start < len(buf); {
		end := nextSpaceChunk(buf, start)
		out = m.spmChunk(sc, buf[start:end], out)
		start = end
	}
	return out
}

func (m *Model) spmChunk(sc *scratch, chunk []byte, out []int32) []int32 {
	if len(chunk) == 0 {
		return out
	}
	if ids, ok := m.cache.get(chunk); ok {
		return append(out, ids...)
	}
	start := len(out)
	out = m.bpeScore(sc, chunk, out)
	m.cache.put(chunk, out[start:])
	return out
}

// Decode implements Tokenizer. Invalid UTF-8 (a sequence cut inside a
// character) comes out as U+FFFD.
func (m *Model) Decode(ids []int32, skipSpecial bool) string {
	buf := make([]byte, 0, len(ids)*4)
	buf = m.AppendDecode(buf, ids, skipSpecial)
	return strings.ToValidUTF8(string(buf), "\uFFFD")
}

// AppendDecode appends the raw bytes of ids to dst (no UTF-8 repair),
// applying the same special-token and leading-space rules as Decode.
func (m *Model) AppendDecode(dst []byte, ids []int32, skipSpecial bool) []byte {
	first := true
	for _, id := range ids {
		if id < 0 || int(id) >= len(m.pieces) {
			continue
		}
		if skipSpecial && m.special[id] {
			continue
		}
		b := m.pieces[id]
		if first && m.stripLeadingSpace && !m.special[id] && len(b) > 0 && b[0] == ' ' {
			b = b[1:]
		}
		first = false
		dst = append(dst, b...)
	}
	return dst
}

// TokenBytes implements Tokenizer. The returned slice is shared: callers
// must not modify it. Unknown ids give nil.
func (m *Model) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= len(m.pieces) {
		return nil
	}
	return m.pieces[id]
}

// TokenString returns TokenBytes(id) as a string without copying it: the
// string shares the model's own bytes, which are never written after the
// model is loaded, so it stays valid and unchanged for the model's life.
// The incremental detokenizer returns it for a token whose text is
// complete, well-formed UTF-8 (no allocation per token). Unknown ids give "".
func (m *Model) TokenString(id int32) string {
	if id < 0 || int(id) >= len(m.pieces) {
		return ""
	}
	b := m.pieces[id]
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// IsSpecial implements Tokenizer.
func (m *Model) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(m.special) && m.special[id]
}

// VocabSize implements Tokenizer.
func (m *Model) VocabSize() int { return len(m.vocab) }

// BOS implements Tokenizer.
func (m *Model) BOS() int32 { return m.bos }

// EOS implements Tokenizer.
func (m *Model) EOS() int32 { return m.eos }

// TokenID implements Tokenizer: added tokens by their literal text first,
// then vocabulary entries as the vocabulary writes them ("Ġthe", "▁the").
func (m *Model) TokenID(tok string) (int32, bool) {
	if id, ok := m.addedText[tok]; ok {
		return id, true
	}
	id, ok := m.ids[tok]
	return id, ok
}

// Token returns the vocabulary text of id ("" if out of range).
func (m *Model) Token(id int32) string {
	if id < 0 || int(id) >= len(m.vocab) {
		return ""
	}
	return m.vocab[id]
}

// Info returns what the tokenizer files say beyond the vocabulary.
func (m *Model) Info() Info { return m.info }

var _ Tokenizer = (*Model)(nil)
