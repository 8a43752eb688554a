package tokenizer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluice-llm/sluice/modelfile/tokfile"
)

// Info is what the tokenizer files say beyond the vocabulary.
type Info struct {
	// Source is the file or directory the tokenizer was loaded from.
	Source string
	// ChatTemplate is the default chat template ("" if none).
	ChatTemplate string
	// ChatTemplates holds named templates (tokenizer_config.json list
	// form), including "default" when present; nil otherwise.
	ChatTemplates map[string]string
	// BOSToken and EOSToken are the texts of BOS/EOS ("" if none).
	BOSToken, EOSToken string
	// BOSID is the BOS id, -1 if none.
	BOSID int32
	// EOSIDs are all ids that end generation: the tokenizer's EOS first,
	// then generation_config.json's eos_token_id list and GGUF's EOT.
	EOSIDs []int32
	// AddBOS and AddEOS report whether Encode with addSpecial adds them.
	AddBOS, AddEOS bool
}

// byteToRune is GPT-2's bytes_to_unicode table (read-only).
var byteToRune, runeToByte = func() (b2r [256]rune, r2b map[rune]byte) {
	r2b = make(map[rune]byte, 256)
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			b2r[b] = rune(b)
		} else {
			b2r[b] = 256 + n
			n++
		}
		r2b[b2r[b]] = byte(b)
	}
	return b2r, r2b
}()

// Load loads the tokenizer for a model. tokenizerPath, when set, wins: a
// directory (Hugging Face layout), a tokenizer.json, a tiktoken encoding
// (a plain .tiktoken rank file, or the tiktoken npm package's JSON form),
// a .gguf, or a llama2.c tokenizer.bin. Otherwise modelPath is used: a
// directory or a .gguf (a llama2.c checkpoint needs tokenizerPath).
//
// tokenizerPath "o200k_harmony" names gpt-oss's tokenizer: o200k_base's
// ranks (taken from modelPath) plus the harmony special tokens (see
// LoadO200kHarmony); "o200k_harmony:PATH" takes the ranks from PATH. The
// ranks are a tiktoken file (a plain one named o200k*.tiktoken gets
// o200k's split pattern) or a directory holding o200k_base.tiktoken or
// o200k_base.json.
func Load(modelPath, tokenizerPath string) (*Model, error) {
	if tokenizerPath == HarmonyName || strings.HasPrefix(tokenizerPath, HarmonyName+":") {
		ranks := strings.TrimPrefix(strings.TrimPrefix(tokenizerPath, HarmonyName), ":")
		if ranks == "" {
			ranks = modelPath
		}
		path, err := o200kRanks(ranks)
		if err != nil {
			return nil, fmt.Errorf("load tokenizer %s: %w", HarmonyName, err)
		}
		return LoadO200kHarmony(path)
	}
	p := tokenizerPath
	if p == "" {
		p = modelPath
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	switch {
	case st.IsDir():
		return LoadDir(p)
	case strings.HasSuffix(p, ".tiktoken"):
		var o TiktokenOptions
		if strings.HasPrefix(filepath.Base(p), "o200k") {
			o.Pattern = PatternO200k // plain rank files carry no pattern
		}
		return LoadTiktoken(p, o)
	case strings.HasSuffix(p, ".json"):
		tiktoken, err := isTiktokenJSON(p)
		if err != nil {
			return nil, fmt.Errorf("load tokenizer: %w", err)
		}
		if tiktoken {
			return LoadTiktoken(p, TiktokenOptions{})
		}
		return LoadTokenizerJSON(p)
	case isGGUF(p):
		return LoadGGUF(p)
	case tokenizerPath != "":
		return LoadLlama2C(p)
	}
	return nil, fmt.Errorf("load tokenizer: %s is neither a model directory nor a GGUF file; pass the tokenizer file explicitly", p)
}

func isGGUF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = f.Read(magic[:])
	return err == nil && string(magic[:]) == "GGUF"
}

// LoadDir loads a Hugging Face layout directory: tokenizer.json (required),
// tokenizer_config.json and generation_config.json (optional).
func LoadDir(dir string) (*Model, error) {
	return LoadTokenizerJSON(filepath.Join(dir, "tokenizer.json"))
}

// LoadTokenizerJSON loads a tokenizer.json, with the tokenizer_config.json
// and generation_config.json beside it when present.
func LoadTokenizerJSON(path string) (*Model, error) {
	tj, err := tokfile.ReadTokenizerJSON(path)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	dir := filepath.Dir(path)
	var cfg *tokfile.TokenizerConfig
	if p := filepath.Join(dir, "tokenizer_config.json"); fileExists(p) {
		if cfg, err = tokfile.ReadTokenizerConfig(p); err != nil {
			return nil, fmt.Errorf("load tokenizer: %w", err)
		}
	}
	var gen *tokfile.GenerationConfig
	if p := filepath.Join(dir, "generation_config.json"); fileExists(p) {
		if gen, err = tokfile.ReadGenerationConfig(p); err != nil {
			return nil, fmt.Errorf("load tokenizer: %w", err)
		}
	}
	m, err := FromTokenizerJSON(tj, cfg, gen)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
	}
	m.info.Source = path
	return m, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// FromTokenizerJSON builds a tokenizer from parsed files; cfg and gen may
// be nil.
func FromTokenizerJSON(tj *tokfile.TokenizerJSON, cfg *tokfile.TokenizerConfig, gen *tokfile.GenerationConfig) (*Model, error) {
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("field model.type: unsupported tokenizer model %q (only BPE)", tj.Model.Type)
	}
	if tj.Model.ContinuingSubwordPrefix != "" || tj.Model.EndOfWordSuffix != "" {
		return nil, fmt.Errorf("field model: continuing_subword_prefix/end_of_word_suffix are not supported")
	}
	m := &Model{unk: -1, bos: -1, eos: -1}
	var err error
	if m.norm, err = compileNormalizer(tj.Normalizer, "normalizer"); err != nil {
		return nil, err
	}
	var byteLevel bool
	if m.pre, byteLevel, err = compilePreTokenizer(tj.PreTokenizer, "pre_tokenizer"); err != nil {
		return nil, err
	}
	if tj.PreTokenizer == nil && tj.Decoder != nil && tj.Decoder.Type == "ByteLevel" {
		byteLevel = true
	}
	m.kind = kindRank
	if byteLevel {
		m.kind = kindByteLevel
	}
	m.byteFallback, m.fuseUnk, m.ignoreMerges = tj.Model.ByteFallback, tj.Model.FuseUnk, tj.Model.IgnoreMerges

	// Vocabulary: model vocab plus added tokens.
	size := 0
	for _, id := range tj.Model.Vocab {
		size = max(size, id+1)
	}
	for _, at := range tj.AddedTokens {
		size = max(size, at.ID+1)
	}
	if size > 1<<24 {
		return nil, fmt.Errorf("field model.vocab: id %d too large", size-1)
	}
	m.vocab = make([]string, size)
	m.ids = make(map[string]int32, len(tj.Model.Vocab))
	for tok, id := range tj.Model.Vocab {
		m.vocab[id] = tok
		m.ids[tok] = int32(id)
	}
	m.special = make([]bool, size)
	m.added = newAddedMatcher()
	m.addedText = make(map[string]int32, len(tj.AddedTokens))
	isAdded := make(map[int32]bool, len(tj.AddedTokens))
	for _, at := range tj.AddedTokens {
		id := int32(at.ID)
		if m.vocab[id] == "" {
			m.vocab[id] = at.Content
		}
		m.special[id] = at.Special
		isAdded[id] = true
		m.addedText[at.Content] = id
		m.added.add(at.Content, addedToken{id: id, special: at.Special, lstrip: at.LStrip, rstrip: at.RStrip, singleWord: at.SingleWord})
	}
	if tj.Model.UnkToken != "" {
		id, ok := m.ids[tj.Model.UnkToken]
		if !ok {
			return nil, fmt.Errorf("field model.unk_token: %q not in vocab", tj.Model.UnkToken)
		}
		m.unk = id
	}
	if err := m.buildMerges(tj.Model.Merges); err != nil {
		return nil, err
	}
	m.setByteTokens()
	if m.kind == kindByteLevel {
		for b, id := range m.byteTok {
			if id < 0 {
				return nil, fmt.Errorf("field model.vocab: byte-level vocabulary lacks the token for byte %#02x", b)
			}
		}
	}
	// Decoded bytes per token.
	m.pieces = make([][]byte, size)
	for id, tok := range m.vocab {
		switch {
		case isAdded[int32(id)] || tok == "":
			m.pieces[id] = []byte(tok)
		case m.kind == kindByteLevel:
			m.pieces[id] = byteLevelBytes(tok)
		default:
			m.pieces[id] = spmBytes(tok, m.byteFallback)
		}
	}
	// Decoder: strip the leading space SentencePiece-style tokenizers add.
	m.stripLeadingSpace = decoderStrips(tj.Decoder)
	if m.kind == kindRank && !m.ignoreMerges { // a whole-word lookup sees the uncut word
		m.chunkOnSpace = spaceChunkSafe(m.vocab, m.special)
	}

	// BOS/EOS and what AddSpecial adds.
	if cfg != nil {
		m.info.ChatTemplate, m.info.ChatTemplates = cfg.ChatTemplate, cfg.ChatTemplates
		m.info.BOSToken, m.info.EOSToken = cfg.BOSToken, cfg.EOSToken
		if id, ok := m.TokenID(cfg.BOSToken); ok && cfg.BOSToken != "" {
			m.bos = id
		}
		if id, ok := m.TokenID(cfg.EOSToken); ok && cfg.EOSToken != "" {
			m.eos = id
		}
	}
	if gen != nil {
		if m.bos < 0 && gen.BOSTokenID >= 0 && gen.BOSTokenID < size {
			m.bos = int32(gen.BOSTokenID)
		}
		if m.eos < 0 && len(gen.EOSTokenIDs) > 0 && gen.EOSTokenIDs[0] < size {
			m.eos = int32(gen.EOSTokenIDs[0])
		}
	}
	templated, err := m.applyPostProcessor(tj.PostProcessor)
	if err != nil {
		return nil, err
	}
	if !templated && cfg != nil {
		if cfg.AddBOSToken != nil && *cfg.AddBOSToken && m.bos >= 0 {
			m.prefix = []int32{m.bos}
		}
		if cfg.AddEOSToken != nil && *cfg.AddEOSToken && m.eos >= 0 {
			m.suffix = []int32{m.eos}
		}
	}
	var genEOS []int
	if gen != nil {
		genEOS = gen.EOSTokenIDs
	}
	m.finishInfo(genEOS, -1)
	m.cache = newPieceCache()
	return m, nil
}

// applyPostProcessor sets prefix/suffix from the post_processor and
// reports whether it defines them (a template or Bert/Roberta).
func (m *Model) applyPostProcessor(pp *tokfile.PostProcessor) (bool, error) {
	if pp == nil {
		return false, nil
	}
	switch pp.Type {
	case "Sequence":
		templated := false
		for _, p := range pp.Processors {
			t, err := m.applyPostProcessor(p)
			if err != nil {
				return false, err
			}
			templated = templated || t
		}
		return templated, nil
	case "ByteLevel":
		return false, nil
	case "TemplateProcessing":
		m.prefix, m.suffix = nil, nil
		seen := false
		for _, piece := range pp.Single {
			switch {
			case piece.Sequence != nil:
				seen = true
			case piece.SpecialToken != nil:
				spec, ok := pp.SpecialTokens[piece.SpecialToken.ID]
				if !ok {
					return false, fmt.Errorf("field post_processor.special_tokens: %q missing", piece.SpecialToken.ID)
				}
				for _, id := range spec.IDs {
					if id < 0 || id >= len(m.vocab) {
						return false, fmt.Errorf("field post_processor.special_tokens[%q]: id %d out of range", spec.ID, id)
					}
					if seen {
						m.suffix = append(m.suffix, int32(id))
					} else {
						m.prefix = append(m.prefix, int32(id))
					}
				}
			}
		}
		return true, nil
	case "BertProcessing", "RobertaProcessing":
		cls, err := m.pairID(pp.Cls, "cls")
		if err != nil {
			return false, err
		}
		sep, err := m.pairID(pp.Sep, "sep")
		if err != nil {
			return false, err
		}
		m.prefix, m.suffix = []int32{cls}, []int32{sep}
		return true, nil
	}
	return false, fmt.Errorf("field post_processor: unsupported type %q", pp.Type)
}

func (m *Model) pairID(pair []any, field string) (int32, error) {
	if len(pair) == 2 {
		if f, ok := pair[1].(float64); ok && f >= 0 && int(f) < len(m.vocab) {
			return int32(f), nil
		}
	}
	return 0, fmt.Errorf("field post_processor.%s: want [token, id]", field)
}

// finishInfo fills Info from the model's ids; extra are further EOS ids.
func (m *Model) finishInfo(extraEOS []int, eot int32) {
	m.info.BOSID = m.bos
	if m.bos >= 0 && m.info.BOSToken == "" {
		m.info.BOSToken = m.vocab[m.bos]
	}
	if m.eos >= 0 && m.info.EOSToken == "" {
		m.info.EOSToken = m.vocab[m.eos]
	}
	seen := map[int32]bool{}
	addEOS := func(id int32) {
		if id >= 0 && int(id) < len(m.vocab) && !seen[id] {
			seen[id] = true
			m.info.EOSIDs = append(m.info.EOSIDs, id)
		}
	}
	addEOS(m.eos)
	for _, id := range extraEOS {
		addEOS(int32(id))
	}
	addEOS(eot)
	m.info.AddBOS = m.bos >= 0 && len(m.prefix) > 0 && m.prefix[0] == m.bos
	m.info.AddEOS = m.eos >= 0 && len(m.suffix) > 0 && m.suffix[len(m.suffix)-1] == m.eos
}

func decoderStrips(d *tokfile.Decoder) bool {
	if d == nil {
		return false
	}
	switch d.Type {
	case "Sequence":
		for _, c := range d.Decoders {
			if decoderStrips(c) {
				return true
			}
		}
	case "Strip":
		return d.Start > 0 && d.Content == " "
	case "Metaspace":
		if d.PrependScheme != "" {
			return d.PrependScheme != "never"
		}
		return d.AddPrefixSpace == nil || *d.AddPrefixSpace
	}
	return false
}

// buildMerges indexes merges by pair. Merges whose tokens are not in the
// vocabulary are an error; a repeated pair keeps its first (lowest) rank.
func (m *Model) buildMerges(merges [][2]string) error {
	m.merges = make(map[uint64]merge, len(merges))
	for rank, pr := range merges {
		a, okA := m.ids[pr[0]]
		b, okB := m.ids[pr[1]]
		c, okC := m.ids[pr[0]+pr[1]]
		if !okA || !okB || !okC {
			return fmt.Errorf("field merges[%d]: %q + %q: token not in vocabulary", rank, pr[0], pr[1])
		}
		k := pairKey(a, b)
		if _, dup := m.merges[k]; !dup {
			m.merges[k] = merge{rank: int32(rank), id: c}
		}
	}
	return nil
}

// setByteTokens fills byteTok: the byte-level character token, or the
// <0xNN> token (falling back to the one-byte token, as llama.cpp does).
func (m *Model) setByteTokens() {
	for b := 0; b < 256; b++ {
		m.byteTok[b] = -1
		if m.kind == kindByteLevel {
			if id, ok := m.ids[string(byteToRune[b])]; ok {
				m.byteTok[b] = id
			}
			continue
		}
		if id, ok := m.ids[fmt.Sprintf("<0x%02X>", b)]; ok {
			m.byteTok[b] = id
		} else if id, ok := m.ids[string([]byte{byte(b)})]; ok && b < utf8.RuneSelf {
			m.byteTok[b] = id
		}
	}
}

// byteLevelBytes undoes the byte-to-unicode mapping; a token with
// characters outside the mapping is returned as is.
func byteLevelBytes(tok string) []byte {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := runeToByte[r]
		if !ok {
			return []byte(tok)
		}
		out = append(out, b)
	}
	return out
}

// spmBytes turns "▁" into a space and, with byteTokens, "<0xNN>" into its
// byte.
func spmBytes(tok string, byteTokens bool) []byte {
	if byteTokens {
		if b, ok := parseByteToken(tok); ok {
			return []byte{b}
		}
	}
	return []byte(strings.ReplaceAll(tok, spaceSym, " "))
}

func parseByteToken(tok string) (byte, bool) {
	if len(tok) != 6 || !strings.HasPrefix(tok, "<0x") || tok[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(tok[3:5], 16, 8)
	if err != nil {
		return 0, false
	}
	return byte(v), true
}

// spaceChunkSafe reports whether no normal token has "▁" right after a
// rune other than "▁", so merges never cross such a boundary.
func spaceChunkSafe(vocab []string, special []bool) bool {
	for id, tok := range vocab {
		if special[id] {
			continue
		}
		for i := 1; i < len(tok); i++ {
			k := strings.Index(tok[i:], spaceSym)
			if k < 0 {
				break
			}
			j := i + k
			if !strings.HasSuffix(tok[:j], spaceSym) {
				return false
			}
			i = j + len(spaceSym) - 1
		}
	}
	return true
}

// ggufPreTokenizer is what llama.cpp's llama-vocab.cpp derives from a
// tokenizer.ggml.pre name: the split regexes (applied in turn, Isolated),
// whether a word found whole in the vocabulary skips merging, and whether
// BOS is added by default.
type ggufPreTokenizer struct {
	patterns     []string
	ignoreMerges bool
	addBOS       bool
}

// gpt2NoTail is the GPT-2 regex as llama.cpp writes it (without the final
// \s+, which only changes how a lone whitespace character is grouped: it
// becomes its own piece either way).
const gpt2NoTail = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`

// ggufPre maps tokenizer.ggml.pre names as llama.cpp does.
func ggufPre(pre string) (ggufPreTokenizer, error) {
	switch pre {
	case "", "default":
		return ggufPreTokenizer{patterns: []string{`[\p{P}\$\+<=>\^~\|]+`, gpt2NoTail, `\p{N}+`, `[0-9][0-9][0-9]`}}, nil
	case "llama3", "llama-v3", "llama-bpe", "falcon3":
		return ggufPreTokenizer{patterns: []string{PatternLlama3}, ignoreMerges: true, addBOS: true}, nil
	case "dbrx", "smaug-bpe", "chatglm-bpe":
		return ggufPreTokenizer{patterns: []string{PatternLlama3}}, nil
	case "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code",
		"roberta-bpe", "mpt", "olmo", "jais":
		return ggufPreTokenizer{patterns: []string{PatternGPT2}}, nil
	case "qwen2", "stablelm2", "megrez", "deepseek-r1-qwen":
		return ggufPreTokenizer{patterns: []string{PatternQwen2}}, nil
	case "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b":
		return ggufPreTokenizer{patterns: []string{`\p{N}`, gpt2NoTail}}, nil
	case "falcon":
		return ggufPreTokenizer{patterns: []string{"[\\p{P}\\$\\+<=>\\^~\\|`]+", gpt2NoTail, `[0-9][0-9][0-9]`}}, nil
	case "deepseek-coder":
		return ggufPreTokenizer{patterns: []string{`[\r\n]`, `\s?\p{L}+`, `\s?\p{P}+`, `[一-龥ࠀ-一가-퟿]+`, `\p{N}`}}, nil
	case "deepseek-v3":
		return ggufPreTokenizer{patterns: []string{`\p{N}{1,3}`, `[一-龥぀-ゟ゠-ヿ]+`,
			"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}, nil
	case "poro-chat", "bloom", "gpt3-finnish":
		return ggufPreTokenizer{patterns: []string{` ?[^(\s|.,!?…。，、।۔،)]+`}}, nil
	case "viking":
		return ggufPreTokenizer{patterns: []string{` ?[^(\s|.,!?…。，、।۔،)]+`, `\p{N}`}}, nil
	case "tekken":
		return ggufPreTokenizer{patterns: []string{`[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
			ignoreMerges: true, addBOS: true}, nil
	}
	return ggufPreTokenizer{}, fmt.Errorf("field tokenizer.ggml.pre: unsupported pre-tokenizer %q", pre)
}

// LoadGGUF loads the tokenizer stored in a GGUF file's metadata.
func LoadGGUF(path string) (*Model, error) {
	v, err := tokfile.ReadGGUFVocab(path)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	m, err := FromGGUFVocab(v)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
	}
	m.info.Source = path
	return m, nil
}

// FromGGUFVocab builds a tokenizer from GGUF vocabulary metadata, following
// llama.cpp's llama-vocab.cpp.
func FromGGUFVocab(v *tokfile.GGUFVocab) (*Model, error) {
	m := &Model{unk: v.UNK, bos: v.BOS, eos: v.EOS}
	n := len(v.Tokens)
	addBOS := false
	switch v.Model {
	case "llama":
		m.kind = kindScore
		if len(v.Scores) != n {
			return nil, errors.New("field tokenizer.ggml.scores: required for a llama (SentencePiece) vocabulary")
		}
		m.scores = v.Scores
		m.addSpacePrefix, m.escapeSpaces, m.stripLeadingSpace = true, true, true
		if v.AddSpacePrefix != nil {
			m.addSpacePrefix = *v.AddSpacePrefix
			m.stripLeadingSpace = *v.AddSpacePrefix
		}
		addBOS = true
	case "gpt2":
		m.kind = kindByteLevel
		pt, err := ggufPre(v.Pre)
		if err != nil {
			return nil, err
		}
		for _, pat := range pt.patterns {
			sp, err := newSplitter(pat, "")
			if err != nil {
				return nil, fmt.Errorf("field tokenizer.ggml.pre %q: %w", v.Pre, err)
			}
			m.pre = append(m.pre, splitStep{sp: sp, behavior: behaviorIsolated})
		}
		m.ignoreMerges, addBOS = pt.ignoreMerges, pt.addBOS
	default:
		return nil, fmt.Errorf("field tokenizer.ggml.model: unsupported tokenizer model %q", v.Model)
	}
	if v.AddBOS != nil {
		addBOS = *v.AddBOS
	}
	m.vocab = v.Tokens
	m.ids = make(map[string]int32, n)
	for id, tok := range v.Tokens {
		m.ids[tok] = int32(id)
	}
	m.special = make([]bool, n)
	m.added = newAddedMatcher()
	m.addedText = make(map[string]int32)
	m.pieces = make([][]byte, n)
	for id, tok := range v.Tokens {
		typ := int32(tokfile.TokenTypeNormal)
		if v.TokenTypes != nil {
			typ = v.TokenTypes[id]
		}
		switch typ {
		case tokfile.TokenTypeControl, tokfile.TokenTypeUnknown:
			m.special[id] = true
			m.added.add(tok, addedToken{id: int32(id), special: true})
			m.addedText[tok] = int32(id)
			m.pieces[id] = []byte(tok)
			continue
		case tokfile.TokenTypeUserDefined:
			m.added.add(tok, addedToken{id: int32(id)})
			m.addedText[tok] = int32(id)
		}
		switch {
		case m.kind == kindByteLevel && typ == tokfile.TokenTypeUserDefined:
			m.pieces[id] = []byte(tok)
		case m.kind == kindByteLevel:
			m.pieces[id] = byteLevelBytes(tok)
		default:
			m.pieces[id] = spmBytes(tok, typ == tokfile.TokenTypeByte)
		}
	}
	if m.kind == kindByteLevel {
		if err := m.buildMerges(v.Merges); err != nil {
			return nil, fmt.Errorf("field tokenizer.ggml.merges: %w", err)
		}
	}
	m.setByteTokens()
	if m.kind == kindByteLevel {
		for b, id := range m.byteTok {
			if id < 0 {
				return nil, fmt.Errorf("field tokenizer.ggml.tokens: byte-level vocabulary lacks the token for byte %#02x", b)
			}
		}
	}
	if m.kind == kindScore {
		m.chunkOnSpace = spaceChunkSafe(m.vocab, m.special)
	}
	if addBOS && m.bos >= 0 {
		m.prefix = []int32{m.bos}
	}
	if v.AddEOS != nil && *v.AddEOS && m.eos >= 0 {
		m.suffix = []int32{m.eos}
	}
	m.info.ChatTemplate = v.ChatTemplate
	// Like llama.cpp, treat the well-known end-of-turn control tokens as
	// end of generation too (GGUF has no generation_config.json).
	var eog []int
	for _, name := range []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>"} {
		if id, ok := m.addedText[name]; ok && m.special[id] {
			eog = append(eog, int(id))
		}
	}
	m.finishInfo(eog, v.EOT)
	m.cache = newPieceCache()
	return m, nil
}

// LoadLlama2C loads a llama2.c tokenizer.bin (SentencePiece vocabulary with
// scores; BOS 1, EOS 2, and BOS added by AddSpecial as run.c does).
func LoadLlama2C(path string) (*Model, error) {
	v, err := tokfile.ReadLlama2C(path)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	m, err := FromLlama2C(v)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
	}
	m.info.Source = path
	return m, nil
}

// FromLlama2C builds a tokenizer from a parsed llama2.c vocabulary. Its
// spaces are turned back into "▁" so that it behaves like the GGUF form.
func FromLlama2C(v *tokfile.Llama2CVocab) (*Model, error) {
	n := len(v.Tokens)
	toks := make([]string, n)
	types := make([]int32, n)
	for id, t := range v.Tokens {
		types[id] = tokfile.TokenTypeNormal
		if _, ok := parseByteToken(t); ok {
			types[id] = tokfile.TokenTypeByte
		}
		toks[id] = strings.ReplaceAll(t, " ", spaceSym)
	}
	gv := &tokfile.GGUFVocab{Model: "llama", Tokens: toks, Scores: v.Scores, TokenTypes: types, BOS: -1, EOS: -1, UNK: -1, PAD: -1, EOT: -1}
	// llama2.c fixes ids 0, 1, 2 as <unk>, BOS, EOS (run.c hard-codes 1 and
	// 2); its export writes BOS/EOS as "\n<s>\n" and "\n</s>\n".
	if n > 2 {
		gv.UNK, gv.BOS, gv.EOS = 0, 1, 2
		types[0] = tokfile.TokenTypeUnknown
		types[1], types[2] = tokfile.TokenTypeControl, tokfile.TokenTypeControl
		for id := 0; id < 3; id++ {
			if tt := strings.TrimSpace(toks[id]); tt != "" {
				toks[id] = tt
			}
		}
	}
	return FromGGUFVocab(gv)
}
