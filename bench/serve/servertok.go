package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// serverTokenizer is the served model's tokenizer reached through the
// server: the vocabulary size from GET /v1/models ("vocab_size") and
// encoding and decoding through vLLM's POST /tokenize and /detokenize. It
// satisfies dataset.Tokenizer so that, without --tokenizer, the random
// dataset draws its prompts from the vocabulary of the model it measures.
//
// dataset.Tokenizer's methods return no error: the first failure is kept in
// err and later calls return empty results.
type serverTokenizer struct {
	ctx     context.Context
	http    *http.Client
	base    string
	apiKey  string
	model   string
	vocab   int
	special map[int32]bool
	err     error
}

// errNoServerTokenizer reports a server that offers no tokenizer to clients
// (no vocab_size in /v1/models, or no /tokenize endpoint).
var errNoServerTokenizer = errors.New("server offers no tokenizer")

// newServerTokenizer asks the server at o.BaseURL for its model's
// tokenizer. It returns an error wrapping errNoServerTokenizer when the
// server does not offer one, and another error when the server cannot be
// reached.
func newServerTokenizer(ctx context.Context, o *Options) (*serverTokenizer, error) {
	t := &serverTokenizer{
		ctx:    ctx,
		http:   &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment}},
		base:   o.BaseURL,
		apiKey: o.APIKey,
		model:  o.Model,
	}
	var list struct {
		Data []struct {
			ID        string `json:"id"`
			VocabSize int    `json:"vocab_size"`
		} `json:"data"`
	}
	if _, err := t.call(http.MethodGet, "/v1/models", nil, &list); err != nil {
		t.close()
		return nil, fmt.Errorf("server tokenizer: %w", err)
	}
	for _, m := range list.Data {
		if t.model == "" || m.ID == t.model {
			t.vocab, t.model = m.VocabSize, m.ID
			break
		}
	}
	if t.vocab <= 0 {
		t.close()
		return nil, fmt.Errorf("server tokenizer: /v1/models reports no vocab_size for %q: %w", t.model, errNoServerTokenizer)
	}
	// The ids the tokenizer adds to an empty text (BOS) are its special
	// ids; prompts leave them out.
	var tok struct {
		Tokens []int32 `json:"tokens"`
	}
	status, err := t.call(http.MethodPost, "/tokenize", map[string]any{"model": t.model, "prompt": "", "add_special_tokens": true}, &tok)
	if err != nil {
		t.close()
		if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
			return nil, fmt.Errorf("server tokenizer: %w: %w", errNoServerTokenizer, err)
		}
		return nil, fmt.Errorf("server tokenizer: %w", err)
	}
	t.special = make(map[int32]bool, len(tok.Tokens))
	for _, id := range tok.Tokens {
		t.special[id] = true
	}
	return t, nil
}

// close releases the tokenizer's idle connections.
func (t *serverTokenizer) close() { t.http.CloseIdleConnections() }

// call sends a request with a JSON body (nil for none) and decodes a 200
// response into out, returning the HTTP status (0 when none came).
func (t *serverTokenizer) call(method, path string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("%s: encode: %w", path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.ctx, method, t.base+path, body)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if t.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.apiKey)
	}
	resp, err := t.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s: read: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("%s: HTTP %d: %s", path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return resp.StatusCode, fmt.Errorf("%s: decode: %w", path, err)
	}
	return resp.StatusCode, nil
}

// Encode tokenizes text with the server's tokenizer.
func (t *serverTokenizer) Encode(text string, addSpecial bool) []int32 {
	if t.err != nil {
		return nil
	}
	var out struct {
		Tokens []int32 `json:"tokens"`
	}
	if _, err := t.call(http.MethodPost, "/tokenize", map[string]any{"model": t.model, "prompt": text, "add_special_tokens": addSpecial}, &out); err != nil {
		t.err = err
		return nil
	}
	return out.Tokens
}

// Decode detokenizes ids with the server's tokenizer (special tokens are
// rendered whatever skipSpecial says: /detokenize has no such option).
func (t *serverTokenizer) Decode(ids []int32, _ bool) string {
	if t.err != nil {
		return ""
	}
	var out struct {
		Prompt string `json:"prompt"`
	}
	if _, err := t.call(http.MethodPost, "/detokenize", map[string]any{"model": t.model, "tokens": ids}, &out); err != nil {
		t.err = err
		return ""
	}
	return out.Prompt
}

// VocabSize is the size /v1/models reports.
func (t *serverTokenizer) VocabSize() int { return t.vocab }

// IsSpecial reports the ids the tokenizer adds to an empty text.
func (t *serverTokenizer) IsSpecial(id int32) bool { return t.special[id] }
