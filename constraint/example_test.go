package constraint_test

import (
	"encoding/json"
	"fmt"

	"github.com/sluice-llm/sluice/constraint"
)

// The frontend turns an unsupported keyword into a 400 naming it.
func ExampleJSONSchema() {
	_, err := constraint.JSONSchema(json.RawMessage(`{"type":"object","properties":{"tags":{"type":"array","uniqueItems":true}}}`), true)
	fmt.Println(err)
	ct, _ := constraint.JSONSchema(json.RawMessage(`{ "type": "integer", "maximum": 9 }`), true)
	fmt.Println(ct.Kind, ct.Spec)
	// Output:
	// unsupported JSON Schema keyword "uniqueItems" at #/properties/tags
	// json_schema {"maximum":9,"type":"integer"}
}
