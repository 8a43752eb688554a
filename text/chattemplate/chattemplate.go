// Package chattemplate renders Hugging Face Jinja chat templates.
//
// It renders a model's chat_template the way transformers'
// apply_chat_template does (ImmutableSandboxedEnvironment with trim_blocks,
// lstrip_blocks and loopcontrols, HF's tojson, raise_exception and
// strftime_now), with vLLM's preprocessing of OpenAI messages: content parts
// are flattened to a string, a null content is "", and tool-call arguments
// given as JSON strings are parsed into objects. JSON objects keep their key
// order, so tool schemas reach the prompt exactly as the client wrote them.
//
// The engine is github.com/nikolalohinski/gonja/v2 with a private
// environment (no gonja globals are modified). Known gonja gaps are worked
// around:
//   - a nested inline if, like ('b' if x else 'c'), is rewritten before
//     parsing into an equivalent lazy and/or form;
//   - string literals with backslashes are decoded with Python's rules
//     (gonja keeps a backslash-newline and mis-scans '\\') and passed as
//     variables;
//   - x[-n] is rewritten to x[-n:][0] (gonja misses it when len(x) == n);
//   - str.strip/lstrip/rstrip/split/rsplit/endswith, dict
//     items/keys/values and the items/dictsort filters follow Python and
//     keep JSON key order; range() returns a bounded list (gonja's leaks a
//     goroutine on break);
//   - include/import/extends are disabled (HF has no loader), macro
//     recursion is bounded, and panics become errors.
//
// Remaining differences from Python (templates that rely on them are rare):
// none and undefined are the same (so "x is defined" is false and
// default() applies for a none value, and none renders as ""); str + dict
// concatenates instead of failing; "%" string formatting fails to render;
// tuples print as lists; -7 // 2 truncates and ** gives floats.
//
// Usage:
//
//	tmpls, err := chattemplate.ParseTokenizerConfig(configJSON)
//	src, err := chattemplate.Pick(tmpls.Templates, "", len(tools) > 0)
//	t, err := chattemplate.New(src)
//	prompt, err := t.Render(chattemplate.Input{Messages: msgs, AddGenerationPrompt: true, ...})
//
// A *Template is safe for concurrent use.
package chattemplate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// Error is a template error: a parse error, an error raised while
// rendering (raise_exception, a bad operation), or a malformed message.
// The API frontend returns it to the client as a 400 with Message.
type Error struct {
	// Message is the text for the client: for raise_exception exactly the
	// template's message.
	Message string
	// Raised is true when the template called raise_exception.
	Raised bool
	// Err is the underlying error, if any.
	Err error
}

// Error implements error.
func (e *Error) Error() string { return "chat template: " + e.Message }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

func templateError(format string, err error) *Error {
	msg := format
	if err != nil {
		msg = fmt.Sprintf("%s: %v", format, err)
	}
	return &Error{Message: msg, Err: err}
}

// Template is a parsed chat template.
type Template struct {
	tpl *exec.Template
	// source is the template as given (before the inline-if rewrite).
	source string
	// strs are the interned string literals (see rewriteSource).
	strs map[string]string
}

const templateName = "/chat_template.jinja"

// New parses a chat template. A syntax error is returned as *Error.
func New(source string) (t *Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, &Error{Message: fmt.Sprintf("parse: internal error: %v", r)}
		}
	}()
	env, err := newEnvironment()
	if err != nil {
		return nil, fmt.Errorf("chat template environment: %w", err)
	}
	rewritten, strs, err := rewriteSource(source, true)
	if err != nil {
		return nil, templateError("parse", err)
	}
	loader, err := loaders.NewMemoryLoader(map[string]string{templateName: rewritten})
	if err != nil {
		return nil, fmt.Errorf("chat template loader: %w", err)
	}
	tpl, err := exec.NewTemplate(templateName, newConfig(), loader, env)
	if err != nil {
		return nil, templateError("parse", stripSource(err, rewritten))
	}
	return &Template{tpl: tpl, source: source, strs: strs}, nil
}

// stripSource removes the template source that gonja copies into its parse
// error messages.
func stripSource(err error, source string) error {
	msg := err.Error()
	if strings.Contains(msg, source) {
		return errors.New(strings.Replace(msg, " '"+source+"'", "", 1))
	}
	return err
}

// Source returns the template text as given to New.
func (t *Template) Source() string { return t.source }

// Input is what a chat template is rendered with.
type Input struct {
	// Messages are OpenAI chat message objects: system, user, assistant
	// (optionally with tool_calls), tool (with tool_call_id). Content is a
	// string, null, or a list of {type: text, text} parts.
	Messages []json.RawMessage
	// Tools are OpenAI tool objects ({type: function, function: {...}}),
	// passed to the template as given (key order kept). Empty: tools is
	// none.
	Tools []json.RawMessage
	// AddGenerationPrompt asks the template to open the assistant turn.
	AddGenerationPrompt bool
	// ContinueFinalMessage renders the last (assistant) message open, so
	// the model continues it; incompatible with AddGenerationPrompt.
	ContinueFinalMessage bool
	// Kwargs are chat_template_kwargs (for example enable_thinking),
	// visible to the template as variables. They cannot replace messages,
	// tools, add_generation_prompt, the special tokens or the functions.
	Kwargs map[string]any
	// BOSToken and EOSToken are the bos_token and eos_token variables.
	BOSToken, EOSToken string
	// Now is the time strftime_now reports; zero means the current time.
	Now time.Time
}

// reserved are the variable names Kwargs may not override.
var reserved = map[string]bool{
	"messages": true, "tools": true, "add_generation_prompt": true,
	"bos_token": true, "eos_token": true, "raise_exception": true,
	"strftime_now": true, stateKey: true,
}

// Render renders the template. Template problems (including a template
// calling raise_exception and malformed messages) are returned as *Error;
// Render never panics.
func (t *Template) Render(in Input) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", &Error{Message: fmt.Sprintf("render: internal error: %v", r)}
		}
	}()
	if in.AddGenerationPrompt && in.ContinueFinalMessage {
		return "", &Error{Message: "continue_final_message and add_generation_prompt are not compatible; use one or the other"}
	}
	msgs, err := convertMessages(in.Messages)
	if err != nil {
		return "", templateError("invalid message", err)
	}
	tools, err := convertTools(in.Tools)
	if err != nil {
		return "", templateError("invalid tool", err)
	}
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	st := &renderState{}
	data := map[string]any{}
	for k, v := range in.Kwargs {
		if !reserved[k] && !strings.HasPrefix(k, internPrefix) {
			data[k] = convertKwarg(v)
		}
	}
	for k, v := range t.strs {
		data[k] = v
	}
	data["messages"] = msgs
	if tools != nil {
		data["tools"] = tools
	} else {
		data["tools"] = nil
	}
	data["add_generation_prompt"] = in.AddGenerationPrompt
	data["bos_token"] = in.BOSToken
	data["eos_token"] = in.EOSToken
	data["raise_exception"] = raiseFunc(st)
	data["strftime_now"] = func(_ *exec.Evaluator, params *exec.VarArgs) (string, error) {
		if len(params.Args) != 1 || !params.Args[0].IsString() {
			return "", errors.New("strftime_now takes one format string")
		}
		return strftime(params.Args[0].String(), now), nil
	}
	data[stateKey] = st

	out, err = t.tpl.ExecuteToString(exec.NewContext(data))
	if st.raised != nil {
		return "", &Error{Message: *st.raised, Raised: true, Err: err}
	}
	if err != nil {
		return "", templateError("render", err)
	}
	if in.ContinueFinalMessage {
		return continueFinal(out, msgs)
	}
	return out, nil
}

// continueFinal cuts the rendered prompt right after the final message's
// content, as transformers does for continue_final_message.
func continueFinal(rendered string, msgs []any) (string, error) {
	if len(msgs) == 0 {
		return "", &Error{Message: "continue_final_message is set but there are no messages"}
	}
	last, _ := msgs[len(msgs)-1].(*exec.Dict)
	cv, _ := dictGet(last, "content")
	final, _ := cv.(string)
	stripped := pyStrip(final)
	loc := strings.LastIndex(rendered, stripped)
	if stripped == "" || loc < 0 {
		if stripped == "" {
			// Python's "".strip() is in every string; rindex("") is len.
			return rendered, nil
		}
		return "", &Error{Message: "continue_final_message is set but the final message does not appear in the chat after applying the chat template! This can happen if the chat template deletes portions of the final message. Please verify the chat template and final message in your chat to ensure they are compatible."}
	}
	lstripped := strings.TrimLeftFunc(final, isPySpace)
	if end := loc + len(lstripped); end <= len(rendered) && rendered[loc:end] == final {
		return rendered[:end], nil
	}
	return rendered[:loc+len(stripped)], nil
}

// isPySpace reports whether r is whitespace for Python's str.strip.
func isPySpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0, 0x1680,
		0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

func pyStrip(s string) string { return strings.TrimFunc(s, isPySpace) }
