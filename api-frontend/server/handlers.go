package server

import (
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/api-frontend/render"
	"github.com/sluice-llm/sluice/outputproc"
	"github.com/sluice-llm/sluice/outputproc/stopstr"
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

// newStream starts the stream of one generation request; chat picks the
// renderer.
func (s *Server) newStream(chat bool, model string, o *openai.Options, id string) *stream {
	now := time.Now()
	if model == "" {
		model = s.cfg.ServedModelNames[0]
	}
	r := &stream{s: s, arrival: now, opts: o}
	rr := render.Request{
		Created:         now.Unix(),
		Model:           model,
		Logprobs:        o.Logprobs >= 0,
		Tok:             s.deps.Tokenizer,
		ContinuousUsage: o.ContinuousUsage,
		IncludeUsage:    o.IncludeUsage,
		Reasoning:       chat && s.deps.NewReasoning != nil,
		ReasoningField:  s.cfg.ReasoningField,
	}
	if chat {
		r.id = "chatcmpl-" + id
		rr.ID = r.id
		r.renderers.chat.Init(rr)
		r.rend, r.prefix = &r.renderers.chat, r.renderers.chat.Header().Prefix()
	} else {
		r.id = "cmpl-" + id
		rr.ID = r.id
		r.renderers.completions.Init(rr)
		r.rend, r.prefix = &r.renderers.completions, r.renderers.completions.Header().Prefix()
	}
	if o.StreamInterval == 0 {
		o.StreamInterval = s.cfg.StreamInterval
	}
	return r
}

// newChoice builds choice index of r for a prompt; po sets the choice's
// echo and parsers (its Index and Text are filled in here).
func (r *stream) newChoice(index int, promptIDs []int32, po outputproc.Options) *choice {
	o := r.opts
	ch := &r.choice0
	if index > 0 {
		ch = new(choice)
	}
	*ch = choice{r: r, index: index, engineID: r.id + "-" + itoa(index), promptIDs: promptIDs}
	po.Index = index
	if r.stopSet == nil && len(o.Stops) > 0 {
		r.stopSet = stopstr.Compile(o.Stops) // one automaton for all choices
	}
	po.Text = outputproc.Params{
		StopSet:        r.stopSet,
		StreamInterval: o.StreamInterval,
		FinalOnly:      !o.Stream,
		Stops:          o.Stops,
		IncludeStop:    o.IncludeStop,
		SkipSpecial:    o.SkipSpecial,
		PromptIDs:      promptIDs,
		MinTokens:      int(o.Params.MinTokens),
		Logprobs:       o.Logprobs >= 0,
		EOSIDs:         r.s.eosIDs(),
	}
	ch.proc.Init(r.s.deps.Tokenizer, po)
	return ch
}

func (s *Server) completions(c *gin.Context) {
	var req openai.CompletionRequest
	if !s.bind(c, &req, &req.Model) {
		return
	}
	s.metrics.CountAPI("completions")
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
	r := s.newStream(false, req.Model, &cr.Options, requestID(c, cr.RequestID))
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
		// Harmony output has no </think> for the engine to wait for: a
		// constraint applies from the first token.
		if cr.Params.Constraint != nil && s.cfg.ReasoningParser != "" && !s.harmonyOutput() {
			text := p.Text
			if !p.FromText {
				text = tok.Decode(p.IDs, false)
			}
			after = !openai.ReasoningClosed(text)
		}
		var po outputproc.Options
		if cr.Echo {
			if p.FromText {
				po.Echo = p.Text
			} else {
				po.Echo = tok.Decode(p.IDs, cr.SkipSpecial)
			}
		}
		for i := 0; i < cr.N; i++ {
			ch := r.newChoice(pi*cr.N+i, p.IDs, po)
			ch.afterReasoning = after
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
	s.metrics.CountAPI("chat")
	chat, e := req.Validate(s.limits(), openai.ToolConfig{AutoEnabled: s.cfg.EnableAutoToolChoice, Parser: s.cfg.ToolCallParser})
	if e != nil {
		writeError(c, e)
		return
	}
	s.serveChat(c, chat, req.Model, nil)
}

// serveChat renders, tokenizes and runs a validated chat request. api is
// nil for /v1/chat/completions; the surfaces mapped onto chat (Responses,
// Messages) give their renderer and hooks here.
func (s *Server) serveChat(c *gin.Context, chat *openai.Chat, model string, api *apiSurface) {
	lim := s.limits()
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
	if api != nil && api.clamp {
		clampMaxTokens(&chat.Options, lim.MaxModelLen, len(ids))
	}
	if e := openai.ContextError(lim.MaxModelLen, len(ids), chat.Params.MaxTokens, "messages"); e != nil {
		writeError(c, e)
		return
	}
	r := s.newStream(true, model, &chat.Options, requestID(c, chat.RequestID))
	r.promptTokens = len(ids)
	var tools []toolparse.Tool
	for _, t := range chat.ToolDefs {
		tools = append(tools, toolparse.Tool{Name: t.Name, Parameters: t.Parameters})
	}
	idGen := func() string { return "chatcmpl-tool-" + newID() }
	if api != nil {
		if model == "" {
			model = s.cfg.ServedModelNames[0]
		}
		r.id = api.prefix + r.id[len("chatcmpl-"):]
		r.rend = api.newRenderer(r.id, model, r.arrival.Unix())
		idGen = func() string { return api.toolPrefix + newID() }
	}
	hm := s.harmonyOutput()
	if hm {
		chat.SkipSpecial = false // the harmony parser reads the markup
	}
	for i := 0; i < chat.N; i++ {
		po := outputproc.Options{ToolID: idGen}
		if chat.Echo && chat.LastRole == "assistant" {
			po.Echo = chat.LastContent
		}
		if hm {
			if e := s.setHarmonyOutput(&po, chat, tools, idGen); e != nil {
				writeError(c, e)
				return
			}
			// The engine's constraint gate waits for a </think>, which
			// harmony never writes: constraints apply from the start.
			r.choices = append(r.choices, r.newChoice(i, ids, po))
			continue
		}
		if s.deps.NewReasoning != nil {
			rp, err := s.deps.NewReasoning(chat, text)
			if err != nil {
				writeError(c, openai.BadRequest("", "reasoning parser: %v", err))
				return
			}
			if rp != nil {
				po.Reasoning = rp
			}
		}
		if e := setToolOutput(&po, chat, s.cfg.ToolCallParser, tools, idGen); e != nil {
			writeError(c, e)
			return
		}
		ch := r.newChoice(i, ids, po)
		// vLLM holds a constraint until reasoning ends, unless the prompt
		// already closed it (or thinking is off: no reasoning parser).
		ch.afterReasoning = po.Reasoning != nil && !openai.ReasoningClosed(text)
		r.choices = append(r.choices, ch)
	}
	if api != nil && api.ping != nil && chat.Stream {
		defer s.pingWhileQueued(r, api.ping)()
	}
	s.run(c, r)
	if api != nil && api.done != nil {
		api.done(r)
	}
}

// setToolOutput sets how a choice reads tool calls for the request's
// tool_choice: the configured parser (auto, and required or named in the
// model's own format), vLLM's generic JSON array, or the named function's
// bare arguments.
func setToolOutput(po *outputproc.Options, chat *openai.Chat, parser string, tools []toolparse.Tool, idGen func() string) *openai.Error {
	mode := chat.ToolChoice.Mode
	switch {
	case mode == "auto" || chat.ToolOutput == openai.ToolOutputParser:
		tp, err := toolparse.New(parser, tools, idGen)
		if err != nil {
			return openai.BadRequest("tool_choice", "tool call parser: %v", err)
		}
		po.Tools = tp
		po.NamedChoice = mode == "named"
	case chat.ToolOutput == openai.ToolOutputJSONArray:
		tp, err := toolparse.New("mistral", tools, idGen)
		if err != nil {
			return openai.BadRequest("tool_choice", "tool call parser: %v", err)
		}
		po.Tools = newJSONArrayParser(tp)
	case mode == "named":
		po.NamedTool = chat.ToolChoice.Name
	}
	return nil
}
