package server

import (
	"encoding/json"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/outputproc"
	"github.com/sluice-llm/sluice/outputproc/toolparse"
)

// requestID picks the response id: the client's X-Request-Id or
// request_id, else a random one.
func requestID(c *gin.Context, bodyID string) string {
	if id := c.GetHeader("X-Request-Id"); id != "" && len(id) <= 256 {
		return id + "-" + newID()[:8]
	}
	if bodyID != "" {
		return bodyID + "-" + newID()[:8]
	}
	return newID()
}

func (s *Server) newGenRequest(chat bool, model string, o *openai.Options, id string) *genRequest {
	now := time.Now()
	if model == "" {
		model = s.cfg.ServedModelNames[0]
	}
	r := &genRequest{s: s, chat: chat, model: model, created: now.Unix(), arrival: now, opts: o}
	if chat {
		r.id = "chatcmpl-" + id
		r.hdr = openai.NewStreamHeader(r.id, "chat.completion.chunk", r.created, model)
	} else {
		r.id = "cmpl-" + id
		r.hdr = openai.NewStreamHeader(r.id, "text_completion", r.created, model)
	}
	if o.StreamInterval == 0 {
		o.StreamInterval = s.cfg.StreamInterval
	}
	return r
}

// newChoice builds choice index of r for a prompt.
func (r *genRequest) newChoice(index int, promptIDs []int32) *choice {
	o := r.opts
	ch := &r.choice0
	if index > 0 {
		ch = new(choice)
	}
	*ch = choice{r: r, index: index, engineID: r.id + "-" + itoa(index), promptIDs: promptIDs}
	ch.st = &ch.state
	ch.st.Init(r.s.deps.Tokenizer, outputproc.Params{
		StreamInterval: o.StreamInterval,
		FinalOnly:      !o.Stream,
		Stops:          o.Stops,
		IncludeStop:    o.IncludeStop,
		SkipSpecial:    o.SkipSpecial,
		PromptIDs:      promptIDs,
		MinTokens:      int(o.Params.MinTokens),
		Logprobs:       o.Logprobs >= 0,
		EOSIDs:         r.s.eosIDs(),
	})
	return ch
}

func (s *Server) completions(c *gin.Context) {
	var req openai.CompletionRequest
	if !s.bind(c, &req, &req.Model) {
		return
	}
	lim := s.limits()
	cr, e := req.Validate(lim)
	if e != nil {
		writeError(c, e)
		return
	}
	if cr.Echo && cr.Logprobs >= 0 {
		writeError(c, openai.BadRequest("echo", "echo together with logprobs (prompt logprobs) is not supported"))
		return
	}
	r := s.newGenRequest(false, req.Model, &cr.Options, requestID(c, cr.RequestID))
	tok := s.deps.Tokenizer
	for pi := range cr.Prompts {
		p := &cr.Prompts[pi]
		if p.FromText {
			p.IDs = tok.Encode(p.Text, true)
			if len(p.IDs) == 0 {
				writeError(c, openai.BadRequest("prompt", "prompt is empty after tokenization (the tokenizer adds no BOS token)"))
				return
			}
		}
		if e := openai.ContextError(lim.MaxModelLen, len(p.IDs), cr.Params.MaxTokens, "prompt"); e != nil {
			writeError(c, e)
			return
		}
		r.promptTokens += len(p.IDs)
		after := false
		if cr.Params.Constraint != nil && s.cfg.ReasoningParser != "" {
			text := p.Text
			if !p.FromText {
				text = tok.Decode(p.IDs, false)
			}
			after = !openai.ReasoningClosed(text)
		}
		for i := 0; i < cr.N; i++ {
			ch := r.newChoice(pi*cr.N+i, p.IDs)
			ch.afterReasoning = after
			if cr.Echo {
				if p.FromText {
					ch.echo = p.Text
				} else {
					ch.echo = tok.Decode(p.IDs, cr.SkipSpecial)
				}
			}
			r.choices = append(r.choices, ch)
		}
	}
	s.run(c, r)
}

func (s *Server) chatCompletions(c *gin.Context) {
	var req openai.ChatRequest
	if !s.bind(c, &req, &req.Model) {
		return
	}
	lim := s.limits()
	chat, e := req.Validate(lim, openai.ToolConfig{AutoEnabled: s.cfg.EnableAutoToolChoice, Parser: s.cfg.ToolCallParser})
	if e != nil {
		writeError(c, e)
		return
	}
	text, e := s.renderChat(chat)
	if e != nil {
		writeError(c, e)
		return
	}
	ids := s.deps.Tokenizer.Encode(text, false)
	if len(ids) == 0 {
		writeError(c, openai.BadRequest("messages", "the rendered chat prompt is empty"))
		return
	}
	if e := openai.ContextError(lim.MaxModelLen, len(ids), chat.Params.MaxTokens, "messages"); e != nil {
		writeError(c, e)
		return
	}
	r := s.newGenRequest(true, req.Model, &chat.Options, requestID(c, chat.RequestID))
	r.promptTokens = len(ids)
	var tools []toolparse.Tool
	for _, t := range chat.ToolDefs {
		tools = append(tools, toolparse.Tool{Name: t.Name, Parameters: t.Parameters})
	}
	idGen := func() string { return "chatcmpl-tool-" + newID() }
	for i := 0; i < chat.N; i++ {
		ch := r.newChoice(i, ids)
		ch.toolIDGen = idGen
		if chat.Echo && chat.LastRole == "assistant" {
			ch.echo = chat.LastContent
		}
		if s.deps.NewReasoning != nil {
			rp, err := s.deps.NewReasoning(chat, text)
			if err != nil {
				writeError(c, openai.BadRequest("", "reasoning parser: %v", err))
				return
			}
			if rp != nil {
				ch.reasoning = rp
			}
		}
		// vLLM holds a constraint until reasoning ends, unless the prompt
		// already closed it (or thinking is off: no reasoning parser).
		ch.afterReasoning = ch.reasoning != nil && !openai.ReasoningClosed(text)
		if e := ch.setToolOutput(chat, s.cfg.ToolCallParser, tools, idGen); e != nil {
			writeError(c, e)
			return
		}
		r.choices = append(r.choices, ch)
	}
	s.run(c, r)
}

// setToolOutput sets how ch reads tool calls for the request's
// tool_choice: the configured parser (auto, and required or named in the
// model's own format), vLLM's generic JSON array, or the named function's
// bare arguments.
func (ch *choice) setToolOutput(chat *openai.Chat, parser string, tools []toolparse.Tool, idGen func() string) *openai.Error {
	mode := chat.ToolChoice.Mode
	switch {
	case mode == "auto" || chat.ToolOutput == openai.ToolOutputParser:
		tp, err := toolparse.New(parser, tools, idGen)
		if err != nil {
			return openai.BadRequest("tool_choice", "tool call parser: %v", err)
		}
		ch.tools = tp
		ch.namedTool = mode == "named"
	case chat.ToolOutput == openai.ToolOutputJSONArray:
		tp, err := toolparse.New("mistral", tools, idGen)
		if err != nil {
			return openai.BadRequest("tool_choice", "tool call parser: %v", err)
		}
		ch.tools = newJSONArrayParser(tp)
	case mode == "named":
		ch.named = chat.ToolChoice.Name
	}
	return nil
}

// Non-streamed response shapes.

type respUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	TotalTokens         int `json:"total_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

type completionChoiceJSON struct {
	Index        int             `json:"index"`
	Text         string          `json:"text"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason"`
}

type toolCallJSON struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatMessageJSON struct {
	Role             string         `json:"role"`
	Content          *string        `json:"content"`
	Reasoning        *string        `json:"reasoning,omitempty"`
	ReasoningContent *string        `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallJSON `json:"tool_calls"`
}

type chatChoiceJSON struct {
	Index        int             `json:"index"`
	Message      chatMessageJSON `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason"`
}

type responseJSON struct {
	ID      string    `json:"id"`
	Object  string    `json:"object"`
	Created int64     `json:"created"`
	Model   string    `json:"model"`
	Choices any       `json:"choices"`
	Usage   respUsage `json:"usage"`
}

func stopJSON(s openai.StopReason) json.RawMessage {
	switch {
	case s.IsText:
		return openai.AppendString(nil, s.Text)
	case s.IsToken:
		return json.RawMessage(itoa(int(s.Token)))
	}
	return json.RawMessage("null")
}

// responseJSON renders the non-streamed body; r.mu is held.
func (r *genRequest) responseJSON() []byte {
	u := r.usage()
	resp := responseJSON{ID: r.id, Created: r.created, Model: r.model}
	resp.Usage = respUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	resp.Usage.PromptTokensDetails.CachedTokens = u.CachedTokens
	if r.chat {
		resp.Object = "chat.completion"
		choices := make([]chatChoiceJSON, 0, len(r.choices))
		for _, ch := range r.choices {
			fr := ch.finish
			cj := chatChoiceJSON{Index: ch.index, FinishReason: &fr, StopReason: stopJSON(ch.stop), Logprobs: json.RawMessage("null")}
			cj.Message.Role = "assistant"
			text := ch.text.String()
			if text != "" || len(ch.calls) == 0 {
				cj.Message.Content = &text
			}
			if ch.reasoning != nil {
				rs := ch.reason.String()
				if r.s.cfg.ReasoningField == "reasoning_content" {
					cj.Message.ReasoningContent = &rs
				} else {
					cj.Message.Reasoning = &rs
				}
			}
			cj.Message.ToolCalls = []toolCallJSON{}
			for _, t := range ch.calls {
				var tc toolCallJSON
				tc.ID, tc.Type = t.ID, "function"
				tc.Function.Name, tc.Function.Arguments = t.Name, t.Arguments
				cj.Message.ToolCalls = append(cj.Message.ToolCalls, tc)
			}
			if r.opts.Logprobs >= 0 {
				lp := openai.Logprobs{TokenIDs: ch.ids, Entries: ch.logprobs, Tok: r.s.deps.Tokenizer}
				c := openai.ChatChoice{Logprobs: &lp}
				cj.Logprobs = chatLogprobsJSON(&c)
			}
			choices = append(choices, cj)
		}
		resp.Choices = choices
	} else {
		resp.Object = "text_completion"
		choices := make([]completionChoiceJSON, 0, len(r.choices))
		for _, ch := range r.choices {
			fr := ch.finish
			cj := completionChoiceJSON{Index: ch.index, Text: ch.text.String(), FinishReason: &fr, StopReason: stopJSON(ch.stop), Logprobs: json.RawMessage("null")}
			if r.opts.Logprobs >= 0 {
				lp := openai.Logprobs{TokenIDs: ch.ids, Entries: ch.logprobs, Tok: r.s.deps.Tokenizer}
				cj.Logprobs = openai.AppendLegacyLogprobs(nil, &lp)
			}
			choices = append(choices, cj)
		}
		resp.Choices = choices
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return openai.NewError(500, "render response: %v", err).AppendJSON(nil)
	}
	return b
}

// chatLogprobsJSON extracts the logprobs object from a rendered chunk.
func chatLogprobsJSON(c *openai.ChatChoice) json.RawMessage {
	return openai.AppendChatLogprobs(nil, c.Logprobs)
}
