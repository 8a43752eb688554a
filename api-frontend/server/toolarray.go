package server

import "github.com/sluice-llm/sluice/outputproc/toolparse"

// jsonArrayPrefix makes vLLM's generic tool-call array
// [{"name": …, "parameters": {…}}, …] read as Mistral's array form.
const jsonArrayPrefix = "[TOOL_CALLS]"

// jsonArrayParser reads the generic array that tool_choice required is
// constrained to when the configured parser's format cannot be expressed
// (or there is none): the mistral parser, fed a [TOOL_CALLS] marker before
// the first text. The marker never reaches the client: if the output does
// not become a call, the marker is cut from the content returned.
type jsonArrayParser struct {
	toolparse.Parser
	started bool
	skip    int // marker bytes still to cut from content
}

func newJSONArrayParser(p toolparse.Parser) *jsonArrayParser {
	return &jsonArrayParser{Parser: p, skip: len(jsonArrayPrefix)}
}

// Add implements toolparse.Parser.
func (p *jsonArrayParser) Add(text string) toolparse.Delta {
	if !p.started {
		p.started = true
		text = jsonArrayPrefix + text
	}
	return p.strip(p.Parser.Add(text))
}

// Finish implements toolparse.Parser.
func (p *jsonArrayParser) Finish() toolparse.Delta { return p.strip(p.Parser.Finish()) }

// strip cuts the marker from content released before any call.
func (p *jsonArrayParser) strip(d toolparse.Delta) toolparse.Delta {
	if p.Called() {
		p.skip = 0
	}
	if p.skip > 0 && d.Content != "" {
		n := min(p.skip, len(d.Content))
		d.Content = d.Content[n:]
		p.skip -= n
	}
	return d
}
