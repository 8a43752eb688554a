package server

import (
	"github.com/sluice-llm/sluice/api-frontend/openai"
	"github.com/sluice-llm/sluice/outputproc"
	"github.com/sluice-llm/sluice/outputproc/harmony"
	"github.com/sluice-llm/sluice/outputproc/toolparse"
)

// harmonyOutput reports whether the configured parsers read gpt-oss's
// harmony format (--reasoning-parser openai_gptoss or --tool-call-parser
// openai). Harmony carries reasoning and tool calls in one markup, so its
// choices get both halves of one harmony parser (harmony.Pair), and their
// text is detokenized with special tokens: the parser needs the markup
// and never releases it.
func (s *Server) harmonyOutput() bool {
	return s.cfg.ReasoningParser == harmony.ReasoningName || s.cfg.ToolCallParser == harmony.ToolName
}

// setHarmonyOutput sets a chat choice's parsers for harmony output: the
// reasoning half when --reasoning-parser is openai_gptoss (else one that
// drops reasoning, so the analysis channel never shows as content), and
// the tool half when --tool-call-parser is openai and the request's
// tool_choice reads the model's own format. tool_choice required or named
// with the generic JSON forms keep the usual readers behind the harmony
// reasoning half.
func (s *Server) setHarmonyOutput(po *outputproc.Options, chat *openai.Chat, tools []toolparse.Tool, idGen func() string) *openai.Error {
	rp, tp := harmony.Pair(tools, idGen)
	if s.cfg.ReasoningParser == harmony.ReasoningName {
		po.Reasoning = rp
	} else {
		po.Reasoning = dropReasoning{rp}
	}
	mode := chat.ToolChoice.Mode
	if s.cfg.ToolCallParser == harmony.ToolName && (mode == "auto" || chat.ToolOutput == openai.ToolOutputParser) {
		po.Tools = tp
		po.NamedChoice = mode == "named"
		return nil
	}
	return setToolOutput(po, chat, s.cfg.ToolCallParser, tools, idGen)
}

// dropReasoning is a reasoning parser whose reasoning is dropped: harmony
// output served without --reasoning-parser still loses its analysis
// channel rather than showing it as content.
type dropReasoning struct{ p outputproc.ReasoningParser }

func (d dropReasoning) Add(text string) (string, string) {
	_, c := d.p.Add(text)
	return "", c
}

func (d dropReasoning) Finish() (string, string) {
	_, c := d.p.Finish()
	return "", c
}
