package e2etest

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestCPUExecutor serves the generated demo model with the real CPU
// executor: the chat template, tokenizer and detokenizer run on real model
// output.
func TestCPUExecutor(t *testing.T) {
	addr := engineAddr(t)
	startEngine(t, addr, "--executor", "cpu") // the later --executor wins over startEngine's sim
	base, _ := startFrontend(t, addr)
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"))
	ctx := context.Background()
	c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:     "demo",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hello!")},
		MaxTokens: openai.Int(8),
		Seed:      openai.Int(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Usage.CompletionTokens != 8 || c.Usage.PromptTokens < 5 || c.Choices[0].FinishReason != "length" {
		t.Fatalf("chat: %+v", c)
	}
	// greedy decoding is deterministic: streamed text equals non-streamed
	params := openai.CompletionNewParams{
		Model:       "demo",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens:   openai.Int(12),
		Temperature: openai.Float(0),
	}
	full, err := client.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	s := client.Completions.NewStreaming(ctx, params)
	var text string
	for s.Next() {
		if ch := s.Current(); len(ch.Choices) > 0 {
			text += ch.Choices[0].Text
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if text != full.Choices[0].Text {
		t.Fatalf("streamed %q, non-streamed %q", text, full.Choices[0].Text)
	}
}
