package guide

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaGen generates random schemas from the supported keyword tiers.
type schemaGen struct {
	rng  *rand.Rand
	defs map[string]any
}

func (g *schemaGen) leaf() map[string]any {
	r := g.rng
	switch r.IntN(11) {
	case 0:
		s := map[string]any{"type": "string"}
		if r.IntN(2) == 0 {
			lo := r.IntN(4)
			s["minLength"] = lo
			s["maxLength"] = lo + r.IntN(6)
		}
		return s
	case 1:
		return map[string]any{"type": "string", "format": []string{"date", "time", "date-time", "uuid", "email", "ipv4", "hostname"}[r.IntN(7)]}
	case 2:
		return map[string]any{"type": "string", "pattern": []string{`^[a-z]+$`, `^\d{3}-\d{2}$`, `ab`, `^(yes|no)$`, `^"[\\]?.$`}[r.IntN(5)]}
	case 3:
		s := map[string]any{"type": "integer"}
		if r.IntN(2) == 0 {
			lo := r.IntN(2000) - 1000
			s["minimum"] = lo
			s["maximum"] = lo + r.IntN(3000)
			if r.IntN(3) == 0 {
				s["exclusiveMinimum"] = lo - r.IntN(50)
			}
		}
		return s
	case 4:
		s := map[string]any{"type": "number"}
		if r.IntN(2) == 0 {
			lo := r.IntN(200) - 100
			s["minimum"] = lo
			s["maximum"] = lo + r.IntN(300)
		} else if r.IntN(2) == 0 {
			s["exclusiveMinimum"] = r.IntN(5) - 2
			s["exclusiveMaximum"] = r.IntN(5) + 3
		}
		return s
	case 5:
		return map[string]any{"type": "boolean"}
	case 6:
		return map[string]any{"type": "null"}
	case 7:
		return map[string]any{"enum": []any{"red", "green", 3, nil, "quo\"te", map[string]any{"k": []any{1, 2}}}[:1+r.IntN(6)]}
	case 8:
		return map[string]any{"const": []any{"fixed", 42, true, []any{"a"}}[r.IntN(4)]}
	case 9:
		return map[string]any{"type": []any{"string", "null"}, "maxLength": 5}
	default:
		return map[string]any{"type": []any{"integer", "null"}, "minimum": 0}
	}
}

func (g *schemaGen) schema(depth int) map[string]any {
	r := g.rng
	if depth <= 0 {
		return g.leaf()
	}
	switch r.IntN(8) {
	case 0, 1:
		props := map[string]any{}
		var order []string
		var req []any
		for i := 0; i < r.IntN(5); i++ {
			name := fmt.Sprintf("p%d", i)
			if i == 2 {
				name = "wi th\"quote"
			}
			props[name] = g.schema(depth - 1)
			order = append(order, name)
			if r.IntN(2) == 0 {
				req = append(req, name)
			}
		}
		s := map[string]any{"type": "object", "properties": props}
		if len(req) > 0 {
			s["required"] = req
		}
		switch r.IntN(4) {
		case 0, 1:
			s["additionalProperties"] = false
		case 2:
			s["additionalProperties"] = map[string]any{"type": "integer", "maximum": 9}
		}
		return s
	case 2:
		s := map[string]any{"type": "array", "items": g.schema(depth - 1)}
		if r.IntN(2) == 0 {
			lo := r.IntN(3)
			s["minItems"] = lo
			s["maxItems"] = lo + r.IntN(4)
		}
		return s
	case 3:
		s := map[string]any{"type": "array", "prefixItems": []any{g.leaf(), g.leaf()}}
		if r.IntN(2) == 0 {
			s["items"] = false
		}
		return s
	case 4:
		return map[string]any{"anyOf": []any{map[string]any{"type": "integer"}, map[string]any{"type": "string", "maxLength": 3}, g.schema(depth - 1)}}
	case 5:
		return map[string]any{"oneOf": []any{map[string]any{"type": "boolean"}, map[string]any{"type": "object", "properties": map[string]any{"x": g.leaf()}, "required": []any{"x"}, "additionalProperties": false}}}
	case 6:
		name := fmt.Sprintf("d%d", len(g.defs))
		g.defs[name] = true // reserve the name
		g.defs[name] = g.schema(depth - 1)
		return map[string]any{"$ref": "#/$defs/" + name, "description": "ref"}
	default:
		// A recursive tree: children are optional so it terminates.
		g.defs["node"] = map[string]any{"type": "object", "properties": map[string]any{
			"v":        map[string]any{"type": "integer"},
			"children": map[string]any{"type": "array", "items": map[string]any{"$ref": "#/$defs/node"}, "maxItems": 2},
		}, "required": []any{"v"}, "additionalProperties": false}
		return map[string]any{"$ref": "#/$defs/node"}
	}
}

func (g *schemaGen) document() string {
	g.defs = map[string]any{}
	s := g.schema(3)
	if len(g.defs) > 0 {
		s["$defs"] = g.defs
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func validator(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("oracle compile %s: %v", schema, err)
	}
	return sch
}

// TestRandomSchemasValidate is the end-to-end property: random schemas ×
// random sampling under the mask always end (EOS) within a length bound
// in output that parses and validates with an independent validator, and
// every mask equals the naive per-token check along the way.
func TestRandomSchemasValidate(t *testing.T) {
	v := testVocab(t)
	c := NewCompiler(v, 16)
	rng := rand.New(rand.NewPCG(7, 11))
	gen := &schemaGen{rng: rng}
	schemas, runs := 150, 6
	if testing.Short() {
		schemas = 30
	}
	for i := 0; i < schemas; i++ {
		doc := gen.document()
		ct := schemaConstraint(t, doc)
		sch := validator(t, doc)
		for j := 0; j < runs; j++ {
			m := mustMatcher(t, c, ct)
			out, ok := decodeRandom(t, m, rng, 4000, 0.5, j == 0)
			if !ok {
				t.Fatalf("schema %s: no EOS within 4000 tokens: %q", doc, out)
			}
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
			if err != nil {
				t.Fatalf("schema %s: output %q does not parse: %v", doc, out, err)
			}
			if err := sch.Validate(inst); err != nil {
				t.Fatalf("schema %s: output %q invalid: %v", doc, out, err)
			}
			if m.DeadEnds != 0 {
				t.Fatalf("schema %s: %d dead ends", doc, m.DeadEnds)
			}
		}
	}
}
