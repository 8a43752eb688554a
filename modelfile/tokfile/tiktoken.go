package tokfile

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
)

// Tiktoken is a tiktoken encoding: byte-sequence ranks (a token's id is its
// rank; lower ranks merge first), the split pattern and the special tokens.
type Tiktoken struct {
	// Pattern is the split regex (pat_str); "" when the file has none
	// (plain .tiktoken rank files carry only the ranks).
	Pattern string
	// Special maps special-token text to id.
	Special map[string]int
	// Ranks holds each rank's bytes; nil where no token has that rank.
	Ranks [][]byte
}

// maxTiktokenRank bounds ranks and special ids so that a hostile file
// cannot make the reader allocate without limit.
const maxTiktokenRank = 1 << 24

// ReadTiktoken reads a tiktoken encoding file: either the JSON form of the
// tiktoken npm package ({"pat_str", "special_tokens", "bpe_ranks"}, with
// bpe_ranks in its compressed "<prefix> <first rank> <base64>..." lines) or
// a plain .tiktoken file ("<base64> <rank>" per line).
func ReadTiktoken(path string) (*Tiktoken, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tiktoken file: %w", err)
	}
	t, err := ParseTiktoken(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseTiktoken parses the content of a tiktoken encoding file (see
// ReadTiktoken).
func ParseTiktoken(data []byte) (*Tiktoken, error) {
	t := &Tiktoken{Special: map[string]int{}}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var raw struct {
			PatStr        string         `json:"pat_str"`
			SpecialTokens map[string]int `json:"special_tokens"`
			BPERanks      *string        `json:"bpe_ranks"`
		}
		if err := json.Unmarshal(trimmed, &raw); err != nil {
			return nil, fmt.Errorf("parse tiktoken json: %w", err)
		}
		if raw.BPERanks == nil {
			return nil, fmt.Errorf("field bpe_ranks: missing")
		}
		t.Pattern = raw.PatStr
		for tok, id := range raw.SpecialTokens {
			if id < 0 || id >= maxTiktokenRank || tok == "" {
				return nil, fmt.Errorf("field special_tokens[%q]: bad id %d", tok, id)
			}
			t.Special[tok] = id
		}
		if err := t.parseCompressed(*raw.BPERanks); err != nil {
			return nil, err
		}
	} else if err := t.parsePlain(data); err != nil {
		return nil, err
	}
	if len(t.Ranks) == 0 {
		return nil, fmt.Errorf("field bpe_ranks: no tokens")
	}
	return t, nil
}

// rankedToken is one token read from the file before Ranks is built.
type rankedToken struct {
	rank int
	tok  []byte
}

// rankReader collects tokens and checks them.
type rankReader struct {
	toks []rankedToken
	seen map[string]bool
	max  int
}

func (rr *rankReader) add(r int, tok []byte, where string) error {
	if r < 0 || r >= maxTiktokenRank {
		return fmt.Errorf("%s: rank %d out of range", where, r)
	}
	if len(tok) == 0 {
		return fmt.Errorf("%s: empty token at rank %d", where, r)
	}
	if rr.seen == nil {
		rr.seen = map[string]bool{}
	}
	if rr.seen[string(tok)] {
		return fmt.Errorf("%s: token %q listed twice", where, tok)
	}
	rr.seen[string(tok)] = true
	rr.toks = append(rr.toks, rankedToken{r, tok})
	rr.max = max(rr.max, r)
	return nil
}

// build fills t.Ranks. Ranks must be dense enough that the table is not
// mostly holes (a hostile file cannot make it allocate for rank 2^24 alone).
func (rr *rankReader) build(t *Tiktoken) error {
	if len(rr.toks) == 0 {
		return nil
	}
	if rr.max+1 > 2*len(rr.toks)+1024 {
		return fmt.Errorf("field bpe_ranks: %d tokens spread over ranks up to %d", len(rr.toks), rr.max)
	}
	t.Ranks = make([][]byte, rr.max+1)
	for _, rt := range rr.toks {
		if t.Ranks[rt.rank] != nil {
			return fmt.Errorf("field bpe_ranks: rank %d given twice", rt.rank)
		}
		t.Ranks[rt.rank] = rt.tok
	}
	return nil
}

// parseCompressed reads tiktoken npm's bpe_ranks: lines of
// "<prefix> <first rank> <base64 token> <base64 token>...", the tokens
// taking consecutive ranks.
func (t *Tiktoken) parseCompressed(s string) error {
	var rr rankReader
	for ln, line := range bytes.Split([]byte(s), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		f := bytes.Split(line, []byte(" "))
		if len(f) < 2 {
			return fmt.Errorf("field bpe_ranks line %d: want \"<prefix> <rank> <tokens>...\"", ln+1)
		}
		off, err := strconv.Atoi(string(f[1]))
		if err != nil || off < 0 || off >= maxTiktokenRank {
			return fmt.Errorf("field bpe_ranks line %d: bad first rank %q", ln+1, f[1])
		}
		where := fmt.Sprintf("field bpe_ranks line %d", ln+1)
		for i, b64 := range f[2:] {
			tok, err := base64.StdEncoding.DecodeString(string(b64))
			if err != nil {
				return fmt.Errorf("%s token %d: %w", where, i, err)
			}
			if err := rr.add(off+i, tok, where); err != nil {
				return err
			}
		}
	}
	return rr.build(t)
}

// parsePlain reads a .tiktoken file: "<base64 token> <rank>" per line.
func (t *Tiktoken) parsePlain(data []byte) error {
	var rr rankReader
	for ln, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimRight(line, "\r")
		if len(line) == 0 {
			continue
		}
		f := bytes.Split(line, []byte(" "))
		if len(f) != 2 {
			return fmt.Errorf("line %d: want \"<base64 token> <rank>\"", ln+1)
		}
		tok, err := base64.StdEncoding.DecodeString(string(f[0]))
		if err != nil {
			return fmt.Errorf("line %d: %w", ln+1, err)
		}
		r, err := strconv.Atoi(string(f[1]))
		if err != nil {
			return fmt.Errorf("line %d: bad rank %q", ln+1, f[1])
		}
		if err := rr.add(r, tok, fmt.Sprintf("line %d", ln+1)); err != nil {
			return err
		}
	}
	return rr.build(t)
}
