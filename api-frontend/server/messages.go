package server

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/sluice-llm/sluice/api-frontend/anthropic"
	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/api-frontend/render"
)

// mapMessages reads and maps a Messages body; it writes the error and
// returns nil on failure.
func (s *Server) mapMessages(c *gin.Context, countOnly bool) (*anthropic.Request, *anthropic.Mapped, *openai.Chat) {
	body, e := s.readBody(c, s.cfg.MaxBodyBytes)
	if e != nil {
		writeError(c, e)
		return nil, nil, nil
	}
	req, e := anthropic.Decode(body)
	if e != nil {
		writeError(c, e)
		return nil, nil, nil
	}
	// Anthropic clients name Claude models (and a second, small one for
	// background work); any model name is served by this server's model.
	m, e := anthropic.Map(req, countOnly)
	if e != nil {
		writeError(c, e)
		return nil, nil, nil
	}
	for _, d := range m.Dropped {
		s.log.Info("messages: server tool left out of the prompt", zap.String("type", d))
	}
	chat, e := m.Chat.Validate(s.limits(), openai.ToolConfig{AutoEnabled: s.cfg.EnableAutoToolChoice, Parser: s.cfg.ToolCallParser})
	if e != nil {
		writeError(c, e)
		return nil, nil, nil
	}
	return req, m, chat
}

// messages serves POST /v1/messages (Anthropic Messages API): mapped onto
// a chat request (anthropic.Map), max_tokens clamped to the context left,
// rendered by an anthropic.Stream.
func (s *Server) messages(c *gin.Context) {
	s.metrics.CountAPI("messages")
	req, _, chat := s.mapMessages(c, false)
	if chat == nil {
		return
	}
	meta := &anthropic.Meta{NewID: func(p string) string { return p + newID() }}
	if s.deps.Sealer != nil {
		meta.Seal = s.deps.Sealer.Seal
	}
	var st *anthropic.Stream
	api := &apiSurface{prefix: "msg_", toolPrefix: "toolu_", clamp: true,
		newRenderer: func(id, model string, _ int64) render.Renderer {
			meta.ID, meta.Model = id, model
			st = anthropic.NewStream(meta)
			return st
		},
		// message_start, then ping events while a long prefill runs.
		ping: func(dst []byte, promptTokens int) []byte {
			return st.Ping(dst, promptTokens)
		},
	}
	s.serveChat(c, chat, req.Model, api)
}

// countTokens serves POST /v1/messages/count_tokens: the prompt's tokens
// through the real chat template.
func (s *Server) countTokens(c *gin.Context) {
	_, _, chat := s.mapMessages(c, true)
	if chat == nil {
		return
	}
	text, e := s.renderChat(chat)
	if e != nil {
		writeError(c, e)
		return
	}
	c.JSON(http.StatusOK, gin.H{"input_tokens": len(s.deps.Tokenizer.Encode(text, false))})
}
