package openai

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluice-llm/sluice/constraint"
	"github.com/sluice-llm/sluice/ipc"
)

// ToolOutput says how the server reads the output of a request whose
// tool_choice is "required" or a named function.
type ToolOutput uint8

const (
	// ToolOutputNone: tool_choice is none or auto (nothing constrained).
	ToolOutputNone ToolOutput = iota
	// ToolOutputParser: the output is the model family's own tool-call
	// markup; the configured tool parser reads it.
	ToolOutputParser
	// ToolOutputJSONArray: the output is vLLM's generic
	// [{"name": …, "parameters": {…}}, …] array (no parser, or one whose
	// format cannot be expressed as a grammar).
	ToolOutputJSONArray
	// ToolOutputArguments: the output is the named function's arguments
	// object, streamed verbatim as that one call's arguments.
	ToolOutputArguments
)

// toolFormat is a model family's tool-call markup around the JSON objects
// {"name": N, ARGKEY: ARGS}: open before the first call, sep between calls,
// close after the last; callOpen and callClose wrap every call.
type toolFormat struct {
	open, sep, close    string
	callOpen, callClose string
	argKey              string
}

// toolFormats are the parsers whose format the grammar reproduces exactly
// as their chat templates write it.
var toolFormats = map[string]toolFormat{
	"hermes":      {sep: "\n", callOpen: "<tool_call>\n", callClose: "\n</tool_call>", argKey: "arguments"},
	"llama3_json": {sep: "; ", argKey: "parameters"},
	"mistral":     {open: "[TOOL_CALLS][", sep: ", ", close: "]", argKey: "arguments"},
	// The generic array vLLM constrains to when no parser applies.
	"": {open: "[", sep: ", ", close: "]", argKey: "parameters"},
}

// deepseekCall is DeepSeek-V3's call markup around the name and arguments.
const (
	deepseekOpen      = "<｜tool▁calls▁begin｜>"
	deepseekClose     = "<｜tool▁calls▁end｜>"
	deepseekCallOpen  = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
	deepseekCallMid   = "\n```json\n"
	deepseekCallClose = "\n```<｜tool▁call▁end｜>"
)

// ToolConstraint builds the constraint for tool_choice "required"
// (multiple: one or more calls, else exactly one) or named (exactly one
// call of name) in the format of the tool parser named parser, and says
// how the output is to be read. Formats a grammar cannot express
// (qwen3_coder, pythonic) fall back to vLLM's behaviour: the generic JSON
// array for required, the function's parameters for named; so does an
// empty parser. A tool's parameters schema that cannot be honoured exactly
// is an error naming the tool (and the keyword).
func ToolConstraint(parser string, tools []Tool, choice ToolChoice, multiple bool) (ipc.Constraint, ToolOutput, error) {
	if choice.Mode != "required" && choice.Mode != "named" {
		return ipc.Constraint{}, ToolOutputNone, fmt.Errorf("tool_choice %q is not constrained", choice.Mode)
	}
	var use []Tool
	for _, t := range tools {
		if choice.Mode == "required" || t.Name == choice.Name {
			use = append(use, t)
		}
	}
	if len(use) == 0 {
		return ipc.Constraint{}, ToolOutputNone, fmt.Errorf("no tool named %q", choice.Name)
	}
	if choice.Mode == "named" {
		multiple = false
	}
	_, native := toolFormats[parser]
	if parser == "deepseek_v3" {
		native = true
	}
	if parser == "" {
		native = false
	}
	if !native && choice.Mode == "named" {
		ct, err := constraint.JSONSchema(paramsSchema(use[0].Parameters), true)
		if err != nil {
			return ipc.Constraint{}, ToolOutputNone, fmt.Errorf("tool %q parameters: %w", use[0].Name, err)
		}
		return ct, ToolOutputArguments, nil
	}
	out := ToolOutputParser
	if !native {
		parser, out = "", ToolOutputJSONArray
	}
	text, err := toolGrammar(parser, use, multiple)
	if err != nil {
		return ipc.Constraint{}, ToolOutputNone, err
	}
	ct, err := constraint.GBNF(text)
	if err != nil {
		return ipc.Constraint{}, ToolOutputNone, fmt.Errorf("tool grammar: %w", err)
	}
	return ct, out, nil
}

// paramsSchema is a tool's parameters schema; none means any JSON object.
func paramsSchema(p json.RawMessage) json.RawMessage {
	if isNull(p) {
		return json.RawMessage(`{"type":"object"}`)
	}
	return p
}

// toolGrammar writes the Lark grammar of calls to tools in parser's format.
// Each tool's parameters schema is compiled by constraint and
// embedded as rules, so the arguments follow the schema exactly.
func toolGrammar(parser string, tools []Tool, multiple bool) (string, error) {
	var sb strings.Builder
	var open, sep, close string
	var calls []string
	for i, t := range tools {
		ct, err := constraint.JSONSchema(paramsSchema(t.Parameters), true)
		if err != nil {
			return "", fmt.Errorf("tool %q parameters: %w", t.Name, err)
		}
		g, err := constraint.Compile(ct)
		if err != nil {
			return "", fmt.Errorf("tool %q parameters: %w", t.Name, err)
		}
		prefix := "t" + strconv.Itoa(i) + "_"
		args := writeLarkRules(&sb, g, prefix)
		name, _ := json.Marshal(t.Name)
		var head, tail string
		if parser == "deepseek_v3" {
			open, sep, close = deepseekOpen, "\n", deepseekClose
			head = deepseekCallOpen + t.Name + deepseekCallMid
			tail = deepseekCallClose
		} else {
			f := toolFormats[parser]
			open, sep, close = f.open, f.sep, f.close
			head = f.callOpen + `{"name": ` + string(name) + `, "` + f.argKey + `": `
			tail = "}" + f.callClose
		}
		call := "call" + strconv.Itoa(i)
		fmt.Fprintf(&sb, "%s: %s %s %s\n", call, larkLiteral(head), args, larkLiteral(tail))
		calls = append(calls, call)
	}
	sb.WriteString("call: " + strings.Join(calls, " | ") + "\n")
	sb.WriteString("start: ")
	if open != "" {
		sb.WriteString(larkLiteral(open) + " ")
	}
	sb.WriteString("call")
	if multiple {
		sb.WriteString(" (" + larkLiteral(sep) + " call)*")
	}
	if close != "" {
		sb.WriteString(" " + larkLiteral(close))
	}
	sb.WriteByte('\n')
	return sb.String(), nil
}

// writeLarkRules writes g's rules as Lark rules named prefix+index and
// returns the name of its start rule. Terminals become /regex/ literals.
func writeLarkRules(sb *strings.Builder, g *constraint.Grammar, prefix string) string {
	name := func(i int) string { return prefix + strconv.Itoa(i) }
	for i, r := range g.Rules {
		var alts []string
		empty := false
		for _, alt := range r.Alts {
			if len(alt) == 0 {
				empty = true
				continue
			}
			parts := make([]string, len(alt))
			for j, s := range alt {
				if s.IsTerminal() {
					parts[j] = larkRegex(g.Terminals[s.Index()])
				} else {
					parts[j] = name(s.Index())
				}
			}
			alts = append(alts, strings.Join(parts, " "))
		}
		body := strings.Join(alts, " | ")
		switch {
		case empty && body == "":
			body = `""`
		case empty:
			body = "[" + body + "]"
		}
		fmt.Fprintf(sb, "%s: %s\n", name(i), body)
	}
	return name(g.Start)
}

// larkRegex writes an RE2 pattern as a Lark /regex/: a bare "/" is
// escaped, and raw line breaks (which would end the definition) are
// written as escapes.
func larkRegex(re string) string {
	var sb strings.Builder
	sb.WriteByte('/')
	for i := 0; i < len(re); i++ {
		c := re[i]
		switch {
		case c == '\\' && i+1 < len(re):
			sb.WriteByte(c)
			sb.WriteByte(re[i+1])
			i++
		case c == '/':
			sb.WriteString(`\/`)
		case c == '\n':
			sb.WriteString(`\n`)
		case c == '\r':
			sb.WriteString(`\r`)
		default:
			sb.WriteByte(c)
		}
	}
	sb.WriteByte('/')
	return sb.String()
}

// larkLiteral writes s as a Lark "string" literal.
func larkLiteral(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&sb, `\x%02x`, r)
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('"')
	return sb.String()
}
