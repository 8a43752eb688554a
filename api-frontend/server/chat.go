package server

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/text/chattemplate"
)

// TemplateRenderer renders chat prompts with the model's Jinja templates
// (a request with tools uses the tool_use template when there is one).
type TemplateRenderer struct {
	templates map[string]string
	bos, eos  string

	// parsed holds the parsed template for requests without tools [0]
	// and with tools [1], found once (no lock, no hash of the source per
	// request).
	parsed [2]atomic.Pointer[chattemplate.Template]
}

// NewTemplateRenderer returns a renderer over named template sources; nil
// when there are none.
func NewTemplateRenderer(templates map[string]string, bos, eos string) (*TemplateRenderer, error) {
	if len(templates) == 0 {
		return nil, nil
	}
	r := &TemplateRenderer{templates: templates, bos: bos, eos: eos}
	// Parse the default now so a broken template fails at startup.
	if _, err := r.template(false); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *TemplateRenderer) template(hasTools bool) (*chattemplate.Template, error) {
	slot := &r.parsed[0]
	if hasTools {
		slot = &r.parsed[1]
	}
	if t := slot.Load(); t != nil {
		return t, nil
	}
	src, err := chattemplate.Pick(r.templates, "", hasTools)
	if err != nil {
		return nil, fmt.Errorf("pick chat template: %w", err)
	}
	for i := range r.parsed {
		if t := r.parsed[i].Load(); t != nil && t.Source() == src {
			slot.Store(t) // the same template serves both
			return t, nil
		}
	}
	// Two first requests may both parse it; they get equal templates.
	t, err := chattemplate.New(src)
	if err != nil {
		return nil, fmt.Errorf("parse chat template: %w", err)
	}
	slot.Store(t)
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
