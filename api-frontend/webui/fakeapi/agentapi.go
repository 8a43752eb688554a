package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// agentRequest is the part of a /v1/responses or /v1/messages request the fake reads.
type agentRequest struct {
	Model           string          `json:"model"`
	Stream          bool            `json:"stream"`
	Input           json.RawMessage `json:"input"`
	Messages        []message       `json:"messages"`
	MaxOutputTokens *int            `json:"max_output_tokens"`
	MaxTokens       *int            `json:"max_tokens"`
	Tools           []struct {
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

// lastText is the text of the request's last input item or message.
func (q *agentRequest) lastText() string {
	var s string
	if json.Unmarshal(q.Input, &s) == nil {
		return s
	}
	var items []message
	if json.Unmarshal(q.Input, &items) == nil && len(items) > 0 {
		q.Messages = items
	}
	if len(q.Messages) == 0 {
		return ""
	}
	raw := q.Messages[len(q.Messages)-1].Content
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// agentAPI serves /v1/responses (anthropic false) or /v1/messages (true) in
// the event shapes of api-frontend/responses and api-frontend/anthropic.
func (s *Server) agentAPI(anthropic bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fail := func(status int, msg string) {
			if !anthropic {
				writeError(w, status, "invalid_request_error", "", msg)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}})
		}
		var q agentRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&q); err != nil {
			fail(http.StatusBadRequest, "invalid JSON body: "+err.Error())
			return
		}
		text := q.lastText()
		switch {
		case q.Model != "" && q.Model != s.cfg.Model:
			fail(http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", q.Model))
			return
		case anthropic && r.Header.Get("anthropic-version") == "":
			fail(http.StatusBadRequest, "the anthropic-version header is required")
			return
		case anthropic && q.MaxTokens == nil:
			fail(http.StatusBadRequest, "max_tokens: field required")
			return
		case strings.Contains(strings.ToLower(text), "refuse"):
			fail(http.StatusBadRequest, "the fake server refuses prompts that say refuse")
			return
		case !q.Stream:
			fail(http.StatusBadRequest, "the fake server only streams (set stream: true)")
			return
		}
		maxTokens := 64
		if q.MaxOutputTokens != nil {
			maxTokens = *q.MaxOutputTokens
		} else if q.MaxTokens != nil {
			maxTokens = *q.MaxTokens
		}
		cq := request{Messages: []message{{Role: "user", Content: mustJSON(text)}}}
		for _, t := range q.Tools {
			name := t.Name
			if name == "" {
				name = t.Function.Name
			}
			cq.Tools = append(cq.Tools, struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}{Function: struct {
				Name string `json:"name"`
			}{Name: name}})
		}
		steps, failAfter := s.script(&cq, maxTokens)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		a := &agentEmitter{w: w, s: s, anthropic: anthropic, id: s.nextID.Add(1), prompt: len(strings.Fields(text)) + 8}
		start := time.Now()
		a.begin()
		if !sleep(r.Context(), s.cfg.FirstTokenDelay) {
			s.finish("abort", a.prompt, 0, start)
			return
		}
		for i, p := range steps {
			if i > 0 && !sleep(r.Context(), s.cfg.TokenInterval) {
				s.finish("abort", a.prompt, a.generated, start)
				return
			}
			if i == failAfter {
				a.errorEvent("the fake engine failed mid-stream (the prompt asked it to fail)")
				s.finish("error", a.prompt, a.generated, start)
				return
			}
			a.generated++
			s.genTok.Add(1)
			if !a.piece(p) {
				s.finish("abort", a.prompt, a.generated, start)
				return
			}
		}
		a.closeBlock()
		finish := "length"
		if len(steps) > 0 && steps[len(steps)-1].toolArgs != "" {
			finish = "tool_calls"
		} else if len(steps) < maxTokens {
			finish = "stop"
		}
		a.end(finish)
		s.finish(finish, a.prompt, a.generated, start)
	}
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// agentEmitter writes one Responses or Messages stream: it opens an output
// item (content block) when the kind of output changes and closes it before
// the next.
type agentEmitter struct {
	w                 http.ResponseWriter
	s                 *Server
	anthropic         bool
	id                uint64
	seq               int
	prompt, generated int
	// open is the kind of the open item ("reasoning", "text", "tool" or ""),
	// index its output index, acc its text so far, toolName its tool.
	open     string
	index    int
	acc      strings.Builder
	toolName string
	items    []any
}

// event writes one named event whose data starts, as the real servers' do,
// with its type (and, for Responses, its sequence number).
func (a *agentEmitter) event(name string, data map[string]any) bool {
	rest, err := json.Marshal(data)
	if err != nil {
		return false
	}
	head := fmt.Sprintf(`{"type":%q`, name)
	if !a.anthropic {
		head += fmt.Sprintf(`,"sequence_number":%d`, a.seq)
		a.seq++
	}
	if len(rest) > 2 {
		head += ","
	}
	n, err := fmt.Fprintf(a.w, "event: %s\ndata: %s%s\n\n", name, head, rest[1:])
	if err != nil {
		return false
	}
	a.s.mChunks.Inc()
	a.s.mBytes.Add(float64(n))
	return http.NewResponseController(a.w).Flush() == nil
}

func (a *agentEmitter) itemID() string {
	return fmt.Sprintf("%s_%d", map[string]string{"reasoning": "rs", "text": "msg", "tool": "fc"}[a.open], a.index+1)
}

func (a *agentEmitter) response(status string) map[string]any {
	r := map[string]any{"id": fmt.Sprintf("resp_fake%d", a.id), "object": "response", "created_at": time.Now().Unix(),
		"status": status, "model": a.s.cfg.Model, "output": []any{}, "usage": nil}
	if status != "in_progress" {
		r["output"] = a.items
		r["usage"] = map[string]any{"input_tokens": a.prompt, "output_tokens": a.generated, "total_tokens": a.prompt + a.generated}
	}
	return r
}

func (a *agentEmitter) begin() {
	if a.anthropic {
		a.event("message_start", map[string]any{"message": map[string]any{"id": fmt.Sprintf("msg_fake%d", a.id), "type": "message",
			"role": "assistant", "model": a.s.cfg.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": a.prompt, "output_tokens": 0}}})
		return
	}
	a.event("response.created", map[string]any{"response": a.response("in_progress")})
	a.event("response.in_progress", map[string]any{"response": a.response("in_progress")})
}

// openBlock starts an item of kind (closing the open one) unless it is open.
func (a *agentEmitter) openBlock(kind, toolName string) {
	if a.open == kind && kind != "tool" {
		return
	}
	if a.open != "" {
		a.closeBlock()
		a.index++
	}
	a.open, a.toolName = kind, toolName
	a.acc.Reset()
	if a.anthropic {
		block := map[string]any{"reasoning": map[string]any{"type": "thinking", "thinking": "", "signature": ""},
			"text": map[string]any{"type": "text", "text": ""},
			"tool": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", a.index), "name": toolName, "input": map[string]any{}}}[kind]
		a.event("content_block_start", map[string]any{"index": a.index, "content_block": block})
		return
	}
	a.event("response.output_item.added", map[string]any{"output_index": a.index, "item": a.item("in_progress")})
	if kind == "text" {
		a.event("response.content_part.added", map[string]any{"item_id": a.itemID(), "output_index": a.index, "content_index": 0,
			"part": map[string]any{"type": "output_text", "annotations": []any{}, "text": ""}})
	}
}

func (a *agentEmitter) item(status string) map[string]any {
	text := a.acc.String()
	if status == "in_progress" {
		text = ""
	}
	switch a.open {
	case "reasoning":
		content := []any{}
		if status != "in_progress" {
			content = []any{map[string]any{"type": "reasoning_text", "text": text}}
		}
		return map[string]any{"id": a.itemID(), "type": "reasoning", "summary": []any{}, "content": content}
	case "tool":
		return map[string]any{"id": a.itemID(), "type": "function_call", "status": status, "call_id": fmt.Sprintf("call_%d", a.index),
			"name": a.toolName, "arguments": text}
	}
	content := []any{}
	if status != "in_progress" {
		content = []any{map[string]any{"type": "output_text", "annotations": []any{}, "text": text}}
	}
	return map[string]any{"id": a.itemID(), "type": "message", "status": status, "role": "assistant", "content": content}
}

// piece sends one step's output.
func (a *agentEmitter) piece(p piece) bool {
	switch {
	case p.toolStart:
		a.openBlock("tool", p.toolName)
		return true
	case p.reasoning != "":
		a.openBlock("reasoning", "")
		a.acc.WriteString(p.reasoning)
		if a.anthropic {
			return a.event("content_block_delta", map[string]any{"index": a.index, "delta": map[string]any{"type": "thinking_delta", "thinking": p.reasoning}})
		}
		return a.event("response.reasoning_text.delta", map[string]any{"item_id": a.itemID(), "output_index": a.index, "content_index": 0, "delta": p.reasoning})
	case p.toolArgs != "":
		a.acc.WriteString(p.toolArgs)
		if a.anthropic {
			return a.event("content_block_delta", map[string]any{"index": a.index, "delta": map[string]any{"type": "input_json_delta", "partial_json": p.toolArgs}})
		}
		return a.event("response.function_call_arguments.delta", map[string]any{"item_id": a.itemID(), "output_index": a.index, "delta": p.toolArgs})
	}
	a.openBlock("text", "")
	a.acc.WriteString(p.content)
	if a.anthropic {
		return a.event("content_block_delta", map[string]any{"index": a.index, "delta": map[string]any{"type": "text_delta", "text": p.content}})
	}
	return a.event("response.output_text.delta", map[string]any{"item_id": a.itemID(), "output_index": a.index, "content_index": 0, "delta": p.content})
}

// closeBlock ends the open item, if any.
func (a *agentEmitter) closeBlock() {
	if a.open == "" {
		return
	}
	text, id := a.acc.String(), a.itemID()
	if a.anthropic {
		if a.open == "reasoning" {
			a.event("content_block_delta", map[string]any{"index": a.index, "delta": map[string]any{"type": "signature_delta", "signature": "fake"}})
		}
		a.event("content_block_stop", map[string]any{"index": a.index})
	} else {
		switch a.open {
		case "reasoning":
			a.event("response.reasoning_text.done", map[string]any{"item_id": id, "output_index": a.index, "content_index": 0, "text": text})
		case "text":
			a.event("response.output_text.done", map[string]any{"item_id": id, "output_index": a.index, "content_index": 0, "text": text})
			a.event("response.content_part.done", map[string]any{"item_id": id, "output_index": a.index, "content_index": 0,
				"part": map[string]any{"type": "output_text", "annotations": []any{}, "text": text}})
		case "tool":
			a.event("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": a.index, "name": a.toolName, "arguments": text})
		}
		it := a.item("completed")
		a.items = append(a.items, it)
		a.event("response.output_item.done", map[string]any{"output_index": a.index, "item": it})
	}
	a.open = ""
}

// end sends the stream's last events for finish ("stop", "length" or "tool_calls").
func (a *agentEmitter) end(finish string) {
	if a.anthropic {
		reason := map[string]string{"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}[finish]
		a.event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": reason, "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": a.generated}})
		a.event("message_stop", map[string]any{})
		return
	}
	if finish == "length" {
		r := a.response("incomplete")
		r["incomplete_details"] = map[string]any{"reason": "max_output_tokens"}
		a.event("response.incomplete", map[string]any{"response": r})
		return
	}
	a.event("response.completed", map[string]any{"response": a.response("completed")})
}

// errorEvent ends the stream with an error in the API's shape: Anthropic's
// error event; for Responses, as the real server does, the open item closed
// and then response.failed carrying the error.
func (a *agentEmitter) errorEvent(msg string) {
	if a.anthropic {
		a.event("error", map[string]any{"error": map[string]any{"type": "api_error", "message": msg}})
		return
	}
	a.closeBlock()
	r := a.response("failed")
	r["error"] = map[string]any{"code": "server_error", "message": msg}
	a.event("response.failed", map[string]any{"response": r})
}
