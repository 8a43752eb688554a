// Package toolparse turns a model's generated text into OpenAI tool calls,
// incrementally, for the model families Sluice supports (hermes, llama3_json,
// mistral, qwen3_coder, pythonic, deepseek_v3).
//
// A Parser is fed the detokenized text as it arrives, in deltas of any size
// (one character up to the whole answer), and returns what the client may be
// sent now: prose as Content, and tool calls as ToolCallDeltas (a call's first
// delta carries its Index, ID, Type "function" and Name; later deltas carry
// argument fragments). Parsers keep incremental state: each byte of output is
// examined a bounded number of times, so the cost of Add is proportional to
// the delta, not to the text so far. Because every decision depends only on
// the text itself, never on where the deltas were cut, the concatenated
// result is the same for every split of the same text, and ParseAll (the
// non-streaming path) is exactly New + Add(text) + Finish.
//
// # Streaming contract
//
//   - Prose is released at once, holding back only a tail that could still
//     become tool markup ("<tool_c" is held, "<b>" is released).
//   - A call is committed, and its first delta sent, as soon as its function
//     name is complete and names one of the request's tools (with no tools
//     given, any name is accepted) and, for the JSON formats, the first 8
//     bytes of its arguments scan as valid JSON (or the arguments are
//     complete): single quotes or unquoted keys are caught while the call
//     can still be returned as content.
//   - Arguments stream as the model writes them. For the JSON formats
//     (hermes, llama3_json, mistral, deepseek_v3) the arguments are passed
//     through verbatim: the fragments are exact substrings of the model's
//     JSON value, checked by a strict incremental JSON scanner, so nothing
//     sent ever has to change and the concatenation equals the model's
//     arguments byte for byte. For the formats whose arguments Sluice builds
//     (qwen3_coder, pythonic) the JSON is written as Python's json.dumps
//     would ({"a": 1, "b": "x"}; nested values compact; non-ASCII
//     unescaped); qwen3_coder streams
//     string-typed parameter values as they arrive, pythonic sends one
//     keyword argument at a time.
//   - Parallel calls get increasing indices. Whitespace-only text at the
//     start of the output right before a call, between calls and after the
//     last call is formatting and is dropped; text after a call that is not
//     whitespace is content (with the whitespace before it). Output with no
//     call at all is returned unchanged as content.
//   - Inside a JSON call object, keys other than "name" and
//     "arguments"/"parameters" are ignored; "arguments" may come before
//     "name" (it is then held until the name arrives); a call without
//     arguments gets "{}". Arguments written as a JSON string holding JSON
//     (double encoded) are passed through as that string.
//   - Malformed markup found before a call is committed (bad JSON, an
//     unknown function name, a missing name) is returned as content,
//     verbatim, markup included. Once a call is committed it cannot be
//     retracted: if its markup turns bad later, the call keeps what was sent
//     (for qwen3_coder and pythonic the arguments object is closed so it
//     stays valid JSON) and the rest of that call's markup, up to its closing
//     tag, is returned as content.
//   - Truncation (max_tokens inside a call): a call whose name was not yet
//     complete is returned as content (its raw text); a committed call keeps
//     the arguments streamed so far and Finish sends the remainder. For the
//     verbatim JSON formats these are the model's raw, incomplete JSON; for
//     qwen3_coder and pythonic, Finish closes the open string and object so
//     that the arguments are valid JSON.
//
// Where each format is recognised: hermes and qwen3_coder at <tool_call>
// anywhere; mistral at [TOOL_CALLS] anywhere; deepseek_v3 at
// <｜tool▁calls▁begin｜> (or <｜tool▁call▁begin｜>) anywhere; llama3_json at
// <|python_tag|> anywhere or a bare JSON object at the very start (other
// keys than name/arguments/parameters/type/id make it prose at once);
// pythonic only when the answer starts with "[" (optionally after
// <|python_start|>), as in vLLM.
//
// # Structure
//
// Every family runs one streaming machine (machine.go): prose → header →
// arguments → close, and back to prose. A family is a table of states (its
// spec, in the family's file) whose generic steps are parameterised by the
// family's markers: find an opener in prose, expect a tag, read a JSON call
// object, stream a JSON arguments value, expect a closing tag, pass
// malformed markup through as content up to a tag. Steps particular to one
// syntax are small hooks beside its table: names up to a delimiter,
// mistral's name form, qwen3_coder's XML-ish parameters and pythonic's
// keyword arguments, which are converted to JSON argument fragments.
//
// The detokenizer must not skip special tokens for these markers to reach
// the parser (for example <tool_call> is a special token in Qwen's vocab).
//
// A Parser is not safe for concurrent use; one belongs to one choice of one
// request.
package toolparse
