package tokenizer

import (
	"testing"

	"github.com/sluice-llm/sluice/modelfile/tokfile"
)

// FuzzFromTokenizerJSON builds tokenizers from hostile tokenizer.json
// content: building may fail, but neither building nor encoding and
// decoding with the result may panic, and byte-level ones must round-trip.
func FuzzFromTokenizerJSON(f *testing.F) {
	// Seeds: a tiny byte-level file and a tiny SentencePiece-style one.
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":true,"use_regex":true}}`), "ab ba")
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"<unk>":0,"a":1,"▁":2,"▁a":3},"merges":[["▁","a"]],"unk_token":"<unk>","fuse_unk":true},
		"normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},{"type":"Replace","pattern":{"String":" "},"content":"▁"}]},
		"pre_tokenizer":{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true},
		"added_tokens":[{"id":4,"content":"<x>","special":true,"lstrip":true,"rstrip":true},{"id":5,"content":"xy","single_word":true}],
		"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<x>"}},{"Sequence":{"id":"A"}}],"special_tokens":{"<x>":{"id":"<x>","ids":[4]}}},
		"decoder":{"type":"Metaspace","replacement":"▁","prepend_scheme":"always"}}`), "a <x> aa xy axy")
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		tj, err := tokfile.ParseTokenizerJSON(data)
		if err != nil {
			return
		}
		m, err := FromTokenizerJSON(tj, nil, nil)
		if err != nil {
			return
		}
		ids := m.Encode(text, true)
		for _, id := range ids {
			if id < 0 || int(id) >= m.VocabSize() {
				t.Fatalf("id %d out of range [0, %d)", id, m.VocabSize())
			}
			m.TokenBytes(id)
		}
		_ = m.Decode(ids, true)
		if m.kind == kindByteLevel && len(m.norm) == 0 && len(m.added.toks) == 0 && !rewritesText(m.pre) {
			if got := m.AppendDecode(nil, m.EncodeWith(text, Options{}), false); string(got) != text {
				t.Fatalf("byte-level round trip of %q = %q", text, got)
			}
		}
	})
}

// rewritesText reports whether a pre-tokenizer step changes the text rather
// than only splitting it (or drops parts of it).
func rewritesText(steps []preStep) bool {
	for _, st := range steps {
		switch s := st.(type) {
		case byteLevelStep:
			if s.addPrefixSpace {
				return true
			}
		case metaspaceStep, whitespaceSplitStep:
			return true
		case splitStep:
			if s.behavior == behaviorRemoved {
				return true
			}
		}
	}
	return false
}
