package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/api-frontend/render"
	"github.com/sluice-llm/sluice/api-frontend/responses"
	"github.com/sluice-llm/sluice/api-frontend/respstore"
)

// storeTimeout bounds one response store operation.
const storeTimeout = 10 * time.Second

// responses serves POST /v1/responses: the request is mapped onto a chat
// request (responses.Map), run like chat, and rendered by a
// responses.Stream; with store (the default) the response and its
// conversation are kept for GET and previous_response_id.
func (s *Server) responses(c *gin.Context) {
	s.metrics.CountAPI("responses")
	body, e := s.readBody(c, s.cfg.MaxBodyBytes)
	if e != nil {
		writeError(c, e)
		return
	}
	req, e := responses.Decode(body)
	if e == nil {
		e = s.checkModel(req.Model)
	}
	if e != nil {
		writeError(c, e)
		return
	}
	var history []json.RawMessage
	prev := ""
	if req.PreviousResponseID != nil && *req.PreviousResponseID != "" {
		prev = *req.PreviousResponseID
		if s.deps.Store == nil {
			writeError(c, openai.BadRequest("previous_response_id", "this server keeps no responses (no response store)"))
			return
		}
		ctx, cancel := context.WithTimeout(c.Request.Context(), storeTimeout)
		entry, err := s.deps.Store.Get(ctx, prev)
		cancel()
		if errors.Is(err, respstore.ErrNotFound) {
			writeError(c, openai.NotFound("previous_response_id", "Previous response with id '%s' not found.", prev))
			return
		}
		if err != nil {
			s.log.Warn("read response store", zap.Error(err))
			writeError(c, openai.NewError(http.StatusInternalServerError, "read response store: %v", err))
			return
		}
		if err := json.Unmarshal(entry.History, &history); err != nil {
			writeError(c, openai.NewError(http.StatusInternalServerError, "stored conversation of %s is corrupt: %v", prev, err))
			return
		}
	}
	var opener responses.Opener
	if s.deps.Sealer != nil {
		opener = s.deps.Sealer
	}
	m, e := responses.Map(req, history, opener)
	if e != nil {
		writeError(c, e)
		return
	}
	for _, d := range m.Dropped {
		s.log.Info("responses: hosted tool left out of the prompt", zap.String("type", d))
	}
	chat, e := m.Chat.Validate(s.limits(), openai.ToolConfig{AutoEnabled: s.cfg.EnableAutoToolChoice, Parser: s.cfg.ToolCallParser})
	if e != nil {
		writeError(c, e)
		return
	}
	meta := &responses.Meta{
		Instructions:       req.Instructions,
		PreviousResponseID: prev,
		Store:              m.Store && s.deps.Store != nil,
		Metadata:           req.Metadata,
		MaxOutputTokens:    req.MaxOutputTokens,
		Temperature:        req.Temperature,
		TopP:               req.TopP,
		ToolChoice:         req.ToolChoice,
		Tools:              req.Tools,
		ParallelToolCalls:  req.ParallelToolCalls == nil || *req.ParallelToolCalls,
		Truncation:         m.Truncation,
		User:               req.User,
		IncludeEncrypted:   m.IncludeEncrypted && s.deps.Sealer != nil,
		NewID:              func(p string) string { return p + newID() },
		CountTokens:        func(t string) int { return len(s.deps.Tokenizer.Encode(t, false)) },
	}
	if req.Text != nil {
		meta.Text, _ = json.Marshal(req.Text)
	}
	if req.Reasoning != nil {
		meta.Reasoning, _ = json.Marshal(req.Reasoning)
	}
	if s.deps.Sealer != nil {
		meta.Seal = s.deps.Sealer.Seal
	}
	var st *responses.Stream
	api := &apiSurface{prefix: "resp_", toolPrefix: "call_",
		newRenderer: func(id, model string, created int64) render.Renderer {
			meta.ID, meta.Model, meta.CreatedAt = id, model, created
			st = responses.NewStream(meta)
			return st
		},
		done: func(r *stream) {
			if !meta.Store {
				return
			}
			r.mu.Lock()
			ok := r.state >= stateEnded && r.err == nil
			final := st.Final()
			items := st.OutputItems()
			r.mu.Unlock()
			if !ok || final == nil {
				return
			}
			conv := make([]json.RawMessage, 0, len(history)+len(m.Input)+len(items))
			conv = append(append(append(conv, history...), m.Input...), items...)
			hist, err := json.Marshal(conv)
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
				err = s.deps.Store.Put(ctx, respstore.Entry{ID: r.id, Response: final, History: hist})
				cancel()
			}
			if err != nil {
				s.log.Warn("store response", zap.String("id", r.id), zap.Error(err))
			}
		},
	}
	s.serveChat(c, chat, req.Model, api)
}

// getResponse serves GET /v1/responses/{id}.
func (s *Server) getResponse(c *gin.Context) {
	id := c.Param("id")
	if s.deps.Store == nil {
		writeError(c, openai.NotFound("response_id", "Response with id '%s' not found.", id))
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), storeTimeout)
	defer cancel()
	e, err := s.deps.Store.Get(ctx, id)
	if errors.Is(err, respstore.ErrNotFound) {
		writeError(c, openai.NotFound("response_id", "Response with id '%s' not found.", id))
		return
	}
	if err != nil {
		writeError(c, openai.NewError(http.StatusInternalServerError, "read response store: %v", err))
		return
	}
	c.Data(http.StatusOK, "application/json", e.Response)
}

// deleteResponse serves DELETE /v1/responses/{id}.
func (s *Server) deleteResponse(c *gin.Context) {
	id := c.Param("id")
	if s.deps.Store == nil {
		writeError(c, openai.NotFound("response_id", "Response with id '%s' not found.", id))
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), storeTimeout)
	defer cancel()
	err := s.deps.Store.Delete(ctx, id)
	if errors.Is(err, respstore.ErrNotFound) {
		writeError(c, openai.NotFound("response_id", "Response with id '%s' not found.", id))
		return
	}
	if err != nil {
		writeError(c, openai.NewError(http.StatusInternalServerError, "delete from response store: %v", err))
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": id, "object": "response.deleted", "deleted": true})
}
