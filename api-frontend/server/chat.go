package server

import (
	"errors"
	"fmt"
	"sync"

	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/text/chattemplate"
)

// TemplateRenderer renders chat prompts with the model's Jinja templates
// (a request with tools uses the tool_use template when there is one).
type TemplateRenderer struct {
	templates map[string]string
	bos, eos  string

	mu     sync.Mutex
	parsed map[string]*chattemplate.Template
}

// NewTemplateRenderer returns a renderer over named template sources; nil
// when there are none.
func NewTemplateRenderer(templates map[string]string, bos, eos string) (*TemplateRenderer, error) {
	if len(templates) == 0 {
		return nil, nil
	}
	r := &TemplateRenderer{templates: templates, bos: bos, eos: eos, parsed: make(map[string]*chattemplate.Template)}
	// Parse the default now so a broken template fails at startup.
	if _, err := r.template(false); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *TemplateRenderer) template(hasTools bool) (*chattemplate.Template, error) {
	src, err := chattemplate.Pick(r.templates, "", hasTools)
	if err != nil {
		return nil, fmt.Errorf("pick chat template: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.parsed[src]; ok {
		return t, nil
	}
	t, err := chattemplate.New(src)
	if err != nil {
		return nil, fmt.Errorf("parse chat template: %w", err)
	}
	r.parsed[src] = t
	return t, nil
}

// Render implements ChatRenderer.
func (r *TemplateRenderer) Render(c *openai.Chat) (string, error) {
	t, err := r.template(len(c.Tools) > 0)
	if err != nil {
		return "", err
	}
	out, err := t.Render(chattemplate.Input{
		Messages:             c.Messages,
		Tools:                c.Tools,
		AddGenerationPrompt:  c.AddGenerationPrompt,
		ContinueFinalMessage: c.ContinueFinalMessage,
		Kwargs:               c.Kwargs,
		BOSToken:             r.bos,
		EOSToken:             r.eos,
	})
	if err != nil {
		var te *chattemplate.Error
		if errors.As(err, &te) {
			return "", errors.New(te.Message)
		}
		return "", err
	}
	return out, nil
}
