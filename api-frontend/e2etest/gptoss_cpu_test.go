package e2etest

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/internal/testenv"
	"github.com/sluice-llm/sluice/modelfile/demo"
)

// TestGptOssCPUServed serves a tiny random gpt-oss-shaped GGUF (MXFP4
// experts, sinks, sliding window, YaRN; from gen-model's gpt-oss-tiny)
// with the real CPU executor and the o200k_harmony tokenizer behind
// api-frontend with gpt-oss's template and the harmony parsers, and sends
// one chat request. The text is random; the request must complete with
// usage that adds up and no harmony markup in what reaches the client.
func TestGptOssCPUServed(t *testing.T) {
	ranks := testenv.SharedFile(t, "tokenizers/o200k/o200k_base.json")
	tmpl, err := filepath.Abs("../../text/chattemplate/testdata/gpt-oss-20b.jinja")
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "gpt-oss-tiny.gguf")
	if err := demo.GenerateReal(model, "gpt-oss-tiny", 1, demo.FormatGGUFMXFP4); err != nil {
		t.Fatal(err)
	}
	addr := engineAddr(t)
	startEngine(t, addr, "--model", model, "--executor", "cpu", "--tokenizer", "o200k_harmony:"+ranks, "--max-model-len", "512")
	base, _ := startFrontend(t, addr, "--model", model, "--tokenizer", "o200k_harmony:"+ranks, "--served-model-name", "gpt-oss",
		"--chat-template", tmpl, "--tool-call-parser", "openai", "--reasoning-parser", "openai_gptoss")

	const maxTokens = 16
	body := `{"model":"gpt-oss","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16,"temperature":0}`
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct {
				Content   string `json:"content"`
				Reasoning string `json:"reasoning"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
			Total      int `json:"total_tokens"`
		} `json:"usage"`
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if len(out.Choices) != 1 {
		t.Fatalf("choices %+v", out.Choices)
	}
	c, u := out.Choices[0], out.Usage
	// the harmony template's prompt for one short user turn is ~70 tokens
	if u.Prompt < 20 || u.Completion < 1 || u.Completion > maxTokens || u.Total != u.Prompt+u.Completion {
		t.Errorf("usage %+v", u)
	}
	if c.FinishReason != "length" && c.FinishReason != "stop" {
		t.Errorf("finish_reason %q", c.FinishReason)
	}
	if c.FinishReason == "length" && u.Completion != maxTokens {
		t.Errorf("finished for length after %d of %d tokens", u.Completion, maxTokens)
	}
	noMarkup(t, "gpt-oss cpu chat", c.Message.Content, c.Message.Reasoning)
}
