package toolparse_test

import (
	"encoding/json"
	"fmt"

	"github.com/sluice-llm/sluice/outputproc/toolparse"
)

// A hermes stream: prose first, then a call whose markup arrives split
// across deltas.
func Example() {
	tools := []toolparse.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}
	p, err := toolparse.New("hermes", tools, func() string { return "call_1" })
	if err != nil {
		panic(err)
	}
	for _, delta := range []string{"Let me check.", " <tool_c", "all>{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Pa", "ris\"}}</tool_call>"} {
		d := p.Add(delta)
		fmt.Printf("content %q", d.Content)
		for _, tc := range d.ToolCalls {
			fmt.Printf(" call[%d] id=%q name=%q args+=%q", tc.Index, tc.ID, tc.Name, tc.Arguments)
		}
		fmt.Println()
	}
	d := p.Finish()
	fmt.Printf("finish %q called=%v\n", d.Content, p.Called())
	// Output:
	// content "Let me check."
	// content " "
	// content ""
	// content "" call[0] id="call_1" name="get_weather" args+="{\"city\": \"Pa"
	// content "" call[0] id="" name="" args+="ris\"}"
	// finish "" called=true
}
