package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// HarmonyName names o200k_harmony, gpt-oss's tokenizer, for Load's
// tokenizerPath ("o200k_harmony" or "o200k_harmony:RANKS").
const HarmonyName = "o200k_harmony"

// o200kRankFiles are the names of o200k_base's rank file that a directory
// given for o200k_harmony is searched for, in order.
var o200kRankFiles = [...]string{"o200k_base.tiktoken", "o200k_base.json"}

// o200kRanks resolves where o200k_base's ranks are: path itself when it is
// a file, else the first of o200kRankFiles in the directory path.
func o200kRanks(path string) (string, error) {
	if path == "" {
		return "", errors.New("no rank file: give o200k_harmony:PATH or a model path holding o200k_base.tiktoken or o200k_base.json")
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("find o200k_base ranks: %w", err)
	}
	if !st.IsDir() {
		return path, nil
	}
	for _, name := range o200kRankFiles {
		p := filepath.Join(path, name)
		if fileExists(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("find o200k_base ranks: %s holds neither %s nor %s", path, o200kRankFiles[0], o200kRankFiles[1])
}

// isTiktokenJSON reports whether the JSON file at path is a tiktoken
// encoding in the npm package's form (top-level "bpe_ranks" or
// "pat_str") rather than a Hugging Face tokenizer.json (top-level "model"
// or "added_tokens"). It reads top-level keys only until one decides.
func isTiktokenJSON(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	return sniffTiktokenJSON(f)
}

// sniffTiktokenJSON is isTiktokenJSON on a reader. A document that is not
// a JSON object, or has none of the deciding keys, is not tiktoken (the
// tokenizer.json loader then reports what is wrong with it).
func sniffTiktokenJSON(r io.Reader) (bool, error) {
	dec := json.NewDecoder(r)
	t, err := dec.Token()
	if err != nil {
		return false, nil
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return false, nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false, nil
		}
		switch t {
		case "bpe_ranks", "pat_str", "special_tokens":
			return true, nil
		case "model", "added_tokens", "normalizer", "pre_tokenizer", "decoder", "version":
			return false, nil
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false, nil
		}
	}
	return false, nil
}
