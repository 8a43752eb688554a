package main

import (
	"fmt"
	"strings"

	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/api-frontend/server"
	"github.com/sluice-llm/sluice/outputproc/reasoning"
	"github.com/sluice-llm/sluice/outputproc/toolparse"
)

// checkParsers fails at startup on unknown parser names.
func checkParsers(toolParser, reasoningParser string) error {
	if toolParser != "" {
		if _, err := toolparse.New(toolParser, nil, func() string { return "" }); err != nil {
			return fmt.Errorf("--tool-call-parser %s: %w", toolParser, err)
		}
	}
	if reasoningParser != "" {
		if _, err := reasoning.New(reasoningParser, reasoning.Options{}); err != nil {
			return fmt.Errorf("--reasoning-parser %s: %w", reasoningParser, err)
		}
	}
	return nil
}

// reasoningFactory returns the reasoning parser constructor for name, or nil.
func reasoningFactory(name string) func(*openai.Chat, string) (server.ReasoningParser, error) {
	if name == "" {
		return nil
	}
	return func(c *openai.Chat, prompt string) (server.ReasoningParser, error) {
		if v, ok := c.Kwargs["enable_thinking"].(bool); ok && !v {
			return nil, nil // thinking disabled: all output is content
		}
		opened := strings.HasSuffix(strings.TrimRight(prompt, " \n"), "<think>")
		p, err := reasoning.New(name, reasoning.Options{ThinkingOpenedInPrompt: opened})
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}
