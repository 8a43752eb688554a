package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-llm/sluice/bench/dataset"
	"github.com/sluice-llm/sluice/bench/metrics"
	"github.com/sluice-llm/sluice/bench/stream"
)

// errNoChunk is vLLM's message for a stream that never carried a choice.
const errNoChunk = "Never received a valid chunk to calculate TTFT.This response will be marked as failed!"

// client sends benchmark requests and times their streams.
type client struct {
	http     *http.Client
	url      string
	apiKey   string
	idPrefix string
	states   sync.Pool // *streamState
}

// streamState is the per-stream scratch a client reuses across requests.
type streamState struct {
	r    *stream.Reader
	p    stream.Parser
	text []byte
	c    stream.Chunk
}

// newTransport returns an HTTP/1.1 transport sized for conns concurrent
// streams: every stream keeps its own connection, idle connections are kept
// for reuse, and compression (pointless for SSE) is off.
func newTransport(conns int) *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: max(conns, 2),
		MaxConnsPerHost:     0,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
		ReadBufferSize:      16 << 10,
		WriteBufferSize:     16 << 10,
	}
}

func newClient(o *Options, conns int) *client {
	c := &client{
		http:     &http.Client{Transport: newTransport(conns)},
		url:      o.BaseURL + o.Endpoint,
		apiKey:   o.APIKey,
		idPrefix: o.RequestIDPrefix,
	}
	c.states.New = func() any {
		return &streamState{r: stream.NewReader(nil, 8<<10), text: make([]byte, 0, 1024)}
	}
	return c
}

// body returns the JSON request body for a sample, as vLLM's request
// functions build it.
func body(o *Options, model string, s dataset.Sample) ([]byte, error) {
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	req := struct {
		Model               string    `json:"model"`
		Prompt              any       `json:"prompt,omitempty"`
		Messages            []message `json:"messages,omitempty"`
		MaxTokens           int       `json:"max_tokens,omitempty"`
		MaxCompletionTokens int       `json:"max_completion_tokens,omitempty"`
		Stream              bool      `json:"stream"`
		StreamOptions       struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		IgnoreEOS      bool `json:"ignore_eos,omitempty"`
		StreamInterval int  `json:"stream_interval,omitempty"`
	}{Model: model, Stream: true, IgnoreEOS: o.IgnoreEOS, StreamInterval: o.StreamInterval}
	req.StreamOptions.IncludeUsage = true
	if o.Endpoint == EndpointChat {
		if s.PromptIDs != nil {
			return nil, errors.New("build request: token-id prompts need /v1/completions")
		}
		req.Messages = []message{{Role: "user", Content: s.Prompt}}
		req.MaxCompletionTokens = s.OutputLen
	} else {
		if s.PromptIDs != nil {
			req.Prompt = s.PromptIDs
		} else {
			req.Prompt = s.Prompt
		}
		req.MaxTokens = s.OutputLen
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	return b, nil
}

// do sends one request (x-request-id prefix+id; id < 0 marks the ready
// check) and fills rec (all but Start and QueueTime, which are
// relative to the benchmark start) and returns the generated text. tok, when
// non-nil, counts output tokens if the server sends no usage.
func (c *client) do(ctx context.Context, reqBody []byte, id int, tok dataset.Tokenizer, rec *metrics.Record) string {
	st := c.states.Get().(*streamState)
	defer c.states.Put(st)
	st.text = st.text[:0]

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(reqBody))
	if err != nil {
		rec.Error = fmt.Sprintf("build request: %v", err)
		return ""
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	switch {
	case c.idPrefix == "":
	case id < 0:
		req.Header.Set("X-Request-Id", c.idPrefix+"ready-check")
	default:
		req.Header.Set("X-Request-Id", c.idPrefix+strconv.Itoa(id))
	}

	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		rec.Error = fmt.Sprintf("send request: %v", err)
		return ""
	}
	defer resp.Body.Close()
	rec.HTTPStatus = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		rec.Error = httpError(resp, &st.p)
		return ""
	}

	st.r.Reset(resp.Body)
	defer st.r.Reset(nil)
	first, last, chunks := true, start, 0
	usageOut := -1
	for {
		data, err := st.r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			rec.Error = fmt.Sprintf("read stream: %v", err)
			return ""
		}
		if string(data) == "[DONE]" {
			continue // read on to EOF so the connection is reused
		}
		now := time.Now()
		st.text, err = st.p.Parse(data, &st.c, st.text)
		if err != nil {
			rec.Error = fmt.Sprintf("decode chunk: %v", err)
			return ""
		}
		if st.c.IsError {
			rec.Error = "error in stream: " + st.c.ErrorMessage
			return ""
		}
		if st.c.Choices > 0 {
			if first {
				rec.TTFT = now.Sub(start).Seconds()
				first = false
			} else {
				rec.ITL = append(rec.ITL, now.Sub(last).Seconds())
			}
			last = now
			chunks++
		}
		if st.c.HasUsage {
			if st.c.CompletionTokens >= 0 {
				usageOut = st.c.CompletionTokens
			}
			if st.c.PromptTokens >= 0 {
				rec.PromptLen = st.c.PromptTokens
			}
		}
	}
	if first {
		rec.Error = errNoChunk
		return ""
	}
	rec.Success = true
	rec.Latency = last.Sub(start).Seconds()
	text := string(st.text)
	switch {
	case usageOut > 0:
		rec.OutputTokens = usageOut
	case tok != nil:
		rec.OutputTokens = dataset.CountTokens(tok, text)
	default:
		rec.OutputTokens = chunks
	}
	return text
}

// httpError describes a non-200 answer: status and the OpenAI error message
// when the body carries one.
func httpError(resp *http.Response, p *stream.Parser) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	msg := strings.TrimSpace(string(b))
	var c stream.Chunk
	if _, err := p.Parse(b, &c, nil); err == nil && c.IsError {
		msg = c.ErrorMessage
	}
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		return "HTTP " + resp.Status
	}
	return "HTTP " + resp.Status + ": " + msg
}

// firstModel returns the id of the first model GET /v1/models lists.
func firstModel(ctx context.Context, c *http.Client, baseURL, apiKey string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/v1/models", nil)
	if err != nil {
		return "", fmt.Errorf("list models: %w", err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("list models: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("list models: HTTP %s", resp.Status)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return "", fmt.Errorf("list models: decode: %w", err)
	}
	if len(list.Data) == 0 {
		return "", fmt.Errorf("list models: no models served at %s", baseURL)
	}
	return list.Data[0].ID, nil
}
