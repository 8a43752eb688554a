package e2etest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// TestAgentAPIsRealWeights serves ../shared/models/llama-2-tiny-random
// (real GGUF weights and tokenizer, the CPU executor) and checks that
// greedy streamed and non-streamed answers agree on both agent APIs.
func TestAgentAPIsRealWeights(t *testing.T) {
	model, err := filepath.Abs("../../../shared/models/llama-2-tiny-random/llama-2-tiny-random.gguf")
	if err == nil {
		_, err = os.Stat(model)
	}
	if err != nil {
		t.Skipf("../shared/models/llama-2-tiny-random is absent (%v): skipping the real-weights run", err)
	}
	tmpl := filepath.Join(t.TempDir(), "chat.jinja")
	// A plain template (the random model has no meaningful one).
	src := `{% for m in messages %}{{ m['content'] }}{{ '\n' }}{% endfor %}`
	if err := os.WriteFile(tmpl, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := engineAddr(t)
	startEngine(t, addr, "--executor", "cpu", "--model", model)
	base, _ := startFrontend(t, addr, "--model", model, "--chat-template", tmpl, "--responses-store", "off")
	ctx := context.Background()

	oc := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	params := responses.ResponseNewParams{
		Model:           openai.ChatModel(filepath.Base(model)),
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Once upon a time, there was a little dog")},
		MaxOutputTokens: openai.Int(16),
		Temperature:     openai.Float(0),
	}
	full, err := oc.Responses.New(ctx, params, option.WithJSONSet("model", ""))
	if err != nil {
		t.Fatal(err)
	}
	s := oc.Responses.NewStreaming(ctx, params, option.WithJSONSet("model", ""))
	var text strings.Builder
	for s.Next() {
		if ev := s.Current(); ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if full.OutputText() == "" || text.String() != full.OutputText() || full.Usage.OutputTokens == 0 {
		t.Fatalf("responses: streamed %q, non-streamed %q (usage %+v)", text.String(), full.OutputText(), full.Usage)
	}
	t.Logf("responses on real weights: %q (%s)", full.OutputText(), full.Status)

	ac := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
	mp := anthropic.MessageNewParams{
		Model: "claude-any", MaxTokens: 16,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Once upon a time, there was a little dog"))},
	}
	greedy := aoption.WithJSONSet("temperature", 0)
	msg, err := ac.Messages.New(ctx, mp, greedy)
	if err != nil {
		t.Fatal(err)
	}
	st := ac.Messages.NewStreaming(ctx, mp, greedy)
	var acc anthropic.Message
	for st.Next() {
		if err := acc.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || len(acc.Content) != 1 || msg.Content[0].Text != acc.Content[0].Text || msg.Content[0].Text != full.OutputText() || msg.StopReason != acc.StopReason {
		t.Fatalf("messages: non-streamed %+v, streamed %+v, responses %q", msg.Content, acc.Content, full.OutputText())
	}
}
