package server

import (
	"reflect"
	"testing"
)

// TestPrefetchCoversHotFields: choice.Prefetch loads a choice and its
// stream up to their hotEnd markers, so every field before a marker is one
// Output reads per token, and every field after it must be named here as
// cold. A new field, or a reorder that moves one across a marker, fails
// this test until it is placed (and, if cold, listed) on purpose.
func TestPrefetchCoversHotFields(t *testing.T) {
	cases := []struct {
		typ  reflect.Type
		hot  []string
		cold []string
	}{
		{reflect.TypeFor[choice](),
			[]string{"r", "proc", "lastOut", "index", "finished", "afterReasoning", "engineID", "promptIDs", "numTokens"},
			[]string{"acc"}},
		{reflect.TypeFor[stream](),
			[]string{"s", "mu", "state", "writing", "queued", "waitQueued", "buf", "events", "framed", "held", "conn", "direct", "send", "engine", "err",
				"stream", "maxBuffered", "rend", "prefix", "renderers", "cached"},
			[]string{"remaining", "choices", "opts", "stopSet", "id", "arrival", "promptTokens", "wake", "bufBox", "endUsage", "clientGone", "ending", "choice0"}},
	}
	for _, c := range cases {
		end, ok := c.typ.FieldByName("hotEnd")
		if !ok {
			t.Fatalf("%s has no hotEnd marker", c.typ)
		}
		want := map[string]bool{"hotEnd": true}
		for _, n := range c.hot {
			want[n] = true
		}
		for _, n := range c.cold {
			want[n] = false
		}
		for i := 0; i < c.typ.NumField(); i++ {
			f := c.typ.Field(i)
			if f.Name == "hotEnd" {
				continue
			}
			hot, listed := want[f.Name]
			switch {
			case !listed:
				t.Errorf("%s.%s is neither hot nor cold here: place it before or after hotEnd and list it", c.typ, f.Name)
			case hot && f.Offset+f.Type.Size() > end.Offset:
				t.Errorf("%s.%s (hot) lies after hotEnd: Prefetch would miss it", c.typ, f.Name)
			case !hot && f.Offset < end.Offset:
				t.Errorf("%s.%s (cold) lies before hotEnd", c.typ, f.Name)
			}
		}
	}
}
