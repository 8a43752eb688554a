package openai

// Message is one chat message in the shape the chat template takes (and
// the chat API accepts): the form the Responses and Anthropic Messages
// request mappers translate their own items into.
type Message struct {
	Role             string         `json:"role"`
	Content          string         `json:"content"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCallItem `json:"tool_calls,omitempty"`
	ToolCallID       string         `json:"tool_call_id,omitempty"`
}

// ToolCallItem is one function call of an assistant Message.
type ToolCallItem struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function a ToolCallItem calls and carries its
// arguments as JSON text.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}
