// Package openai holds the OpenAI-compatible protocol of the frontend: the
// request bodies of /v1/completions and /v1/chat/completions with their
// validation (every rejection names the offending field), the error body,
// and the hand-written JSON writers (AppendString, AppendFloat) the
// renderers in api-frontend/render use on the per-token path.
//
// Structured outputs: response_format (json_object, json_schema), vLLM's
// structured_outputs object and its older guided_* fields are compiled
// here with constraint into the one ipc.Constraint the engine
// enforces (Options.Params.Constraint); more than one is a 400, and so is a
// schema the engine could not honour exactly. tool_choice "required" and
// named become a grammar of the model family's own tool-call markup
// (ToolConstraint) with each tool's parameters schema embedded, or vLLM's
// generic forms where the format cannot be expressed. ConstraintCache
// memoizes the compilation across requests.
//
// Shapes follow vLLM's OpenAI server (see docs/design/vllm-notes.md §4):
// null fields are written as null, never "", every chunk carries one choice,
// and the final chunk of a choice carries finish_reason and stop_reason.
package openai
