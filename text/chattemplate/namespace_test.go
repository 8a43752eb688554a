package chattemplate

import (
	"strings"
	"testing"
	"time"
)

// TestNamespaceRepr checks namespace(): attributes set in loops, Jinja's
// repr, and values that contain themselves, which print to a bounded depth
// (gonja's own printer recursed until the Go stack overflowed and the
// process died: fuzz input a3773712becef5c2) or fail in tojson.
func TestNamespaceRepr(t *testing.T) {
	for _, c := range []struct {
		src, want string
		prefix    bool // want is a prefix, the output ends in "..."
		err       bool
	}{
		{src: `{% set ns = namespace(a=1) %}{% set ns.a = ns.a + 1 %}{{ ns.a }}`, want: "2"},
		{src: `{% set ns = namespace(found=false) %}{% for m in [1, 2] %}{% if m == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}`, want: "True"},
		{src: `{% set ns = namespace(a=1, b='x') %}{{ ns }}{{ [ns] }}`, want: `<Namespace {'a': 1, 'b': 'x'}>[<Namespace {'a': 1, 'b': 'x'}>]`},
		{src: `{% set ns = namespace(a=1, b=[1, 'x']) %}{{ ns | tojson }}`, want: `{"a": 1, "b": [1, "x"]}`},
		{src: `{% set ns = namespace(a=1) %}{% set ns.a = ns %}{{ ns }}`, want: `<Namespace {'a': <Namespace {'a': `, prefix: true},
		{src: `{% set ns = namespace(a=1) %}{% set ns.a = ns %}{{ ns.a }}`, want: `<Namespace {'a': `, prefix: true},
		{src: `{% set ns = namespace(a=1) %}{% set ns.a = [ns] %}{{ ns.a }}`, want: `[<Namespace {'a': [<Namespace`, prefix: true},
		{src: `{% set ns = namespace(a=1) %}{% set ns.a = ns %}{{ ns | tojson }}`, err: true},
	} {
		tpl, err := New(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		out, err := tpl.Render(Input{Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
		switch {
		case c.err:
			if err == nil {
				t.Errorf("%s: rendered %.80q, want an error", c.src, out)
			}
		case err != nil:
			t.Errorf("%s: %v", c.src, err)
		case c.prefix:
			if !strings.HasPrefix(out, c.want) || !strings.Contains(out, "...") || len(out) > 4096 {
				t.Errorf("%s: %.200q: want a bounded repr starting %q", c.src, out, c.want)
			}
		case out != c.want:
			t.Errorf("%s: %q, want %q", c.src, out, c.want)
		}
	}
}
