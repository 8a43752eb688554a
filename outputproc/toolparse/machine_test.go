package toolparse

import "testing"

// TestSpecsWellFormed checks every family's table: each state reachable by
// index exists, each step has the markers and next states its op reads,
// and hook states have a hook.
func TestSpecsWellFormed(t *testing.T) {
	if len(families) != len(names) {
		t.Fatalf("%d families, %d names", len(families), len(names))
	}
	for _, name := range names {
		s := families[name]
		if s == nil {
			t.Fatalf("%s: no spec", name)
		}
		n := uint8(len(s.states))
		for _, st := range []uint8{s.start, s.bad, s.fault} {
			if st >= n {
				t.Errorf("%s: start/bad/fault state %d out of range (%d states)", name, st, n)
			}
		}
		for i, st := range s.states {
			// How many tags each op reads (-1: one or more) and whether
			// it goes on to st.to.
			tags, usesTo := 0, false
			switch st.op {
			case opProse, opExpect:
				tags = -1
			case opClose, opRaw, opList:
				tags, usesTo = 1, true
			case opObj, opArgs:
				usesTo = true
			case opHook:
				if st.hook == nil {
					t.Errorf("%s: state %d: opHook without a hook", name, i)
				}
			}
			switch {
			case tags == -1 && len(st.tags) == 0, tags >= 0 && len(st.tags) != tags:
				t.Errorf("%s: state %d: op %d with %d tags", name, i, st.op, len(st.tags))
			}
			wantTos := 0
			switch st.op {
			case opProse, opExpect:
				wantTos = len(st.tags)
			case opList:
				wantTos = 1
			}
			if len(st.tos) != wantTos {
				t.Errorf("%s: state %d: %d next states, want %d", name, i, len(st.tos), wantTos)
			}
			for _, to := range st.tos {
				if to >= n {
					t.Errorf("%s: state %d: next state %d out of range", name, i, to)
				}
			}
			if usesTo && st.to >= n {
				t.Errorf("%s: state %d: next state %d out of range", name, i, st.to)
			}
		}
	}
}
