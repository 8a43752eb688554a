package outputproc

import (
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/ipc"
)

// byteTok is a byte-level tokenizer: id b < 256 is byte b, 256 is "</s>".
type byteTok struct{}

const eos = 256

func (byteTok) Encode(text string, _ bool) []int32 {
	ids := make([]int32, len(text))
	for i := range len(text) {
		ids[i] = int32(text[i])
	}
	return ids
}
func (byteTok) Decode(ids []int32, skipSpecial bool) string {
	var b []byte
	for _, id := range ids {
		b = append(b, byteTok{}.TokenBytes(id)...)
		if id == eos && skipSpecial {
			b = b[:len(b)-4]
		}
	}
	return string(b)
}
func (byteTok) TokenBytes(id int32) []byte {
	if id == eos {
		return []byte("</s>")
	}
	return []byte{byte(id)}
}
func (byteTok) IsSpecial(id int32) bool { return id == eos }
func (byteTok) VocabSize() int          { return 257 }
func (byteTok) BOS() int32              { return -1 }
func (byteTok) EOS() int32              { return eos }
func (byteTok) TokenID(string) (int32, bool) {
	return -1, false
}

// feed runs text through a State in steps of the given sizes (cycled),
// the engine finishing with fr on the last step, and returns the deltas.
func feed(t *testing.T, p Params, text string, steps []int, fr ipc.FinishReason, hold func(i int) bool) (deltas []TextDelta, aborted bool) {
	t.Helper()
	st := New(byteTok{}, p)
	ids := byteTok{}.Encode(text, false)
	if fr == ipc.FinishStop {
		ids = append(ids, eos)
	}
	for i, k := 0, 0; i < len(ids); k++ {
		n := min(steps[k%len(steps)], len(ids)-i)
		out := &ipc.Output{NewTokenIDs: ids[i : i+n], StopReason: -1}
		i += n
		if i == len(ids) {
			out.FinishReason = fr
			if fr == ipc.FinishStop {
				out.StopReason = eos
			}
		}
		h := hold != nil && hold(k)
		d, ab := st.Process(out, h)
		if ab {
			aborted = true
		}
		if d != nil {
			c := *d
			c.Text = strings.Clone(d.Text)
			c.TokenIDs = append([]int32(nil), d.TokenIDs...)
			deltas = append(deltas, c)
			if d.Finished {
				break
			}
		}
	}
	return deltas, aborted
}

func join(ds []TextDelta) (text string, tokens int) {
	for _, d := range ds {
		text += d.Text
		tokens += len(d.TokenIDs)
	}
	return
}

func TestStreamInterval(t *testing.T) {
	const text = "The quick brown fox jumps over the lazy dog"
	cases := []struct {
		name     string
		interval int
		steps    []int
		want     []int // tokens per delta
	}{
		{"interval 1", 1, []int{1}, nil},
		{"interval 3", 3, []int{1}, []int{1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}},
		{"interval 10", 10, []int{1}, []int{1, 10, 10, 10, 10, 2}},
		{"interval 4 multi-token steps", 4, []int{2, 3}, []int{2, 5, 5, 5, 5, 5, 5, 5, 5, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds, _ := feed(t, Params{StreamInterval: tc.interval}, text, tc.steps, ipc.FinishLength, nil)
			got, n := join(ds)
			if got != text || n != len(text) {
				t.Fatalf("text %q (%d tokens), want %q", got, n, text)
			}
			if !ds[0].First || ds[len(ds)-1].FinishReason != ipc.FinishLength || !ds[len(ds)-1].Finished {
				t.Fatalf("first/finish flags wrong: %+v", ds[len(ds)-1])
			}
			if tc.want != nil {
				var sizes []int
				for _, d := range ds {
					sizes = append(sizes, len(d.TokenIDs))
				}
				if len(sizes) != len(tc.want) {
					t.Fatalf("delta sizes %v, want %v", sizes, tc.want)
				}
				for i := range sizes {
					if sizes[i] != tc.want[i] {
						t.Fatalf("delta sizes %v, want %v", sizes, tc.want)
					}
				}
			} else if len(ds) != len(text) {
				t.Fatalf("%d deltas for %d tokens at interval 1", len(ds), len(text))
			}
		})
	}
}

func TestHoldMergesDeltas(t *testing.T) {
	const text = "abcdefghij"
	// the client is slow for steps 1..5: those tokens merge into one delta
	ds, _ := feed(t, Params{StreamInterval: 1}, text, []int{1}, ipc.FinishLength, func(i int) bool { return i >= 1 && i <= 5 })
	got, _ := join(ds)
	if got != text {
		t.Fatalf("text %q", got)
	}
	if len(ds) != 5 || ds[1].Text != "bcdefg" {
		t.Fatalf("deltas %q", texts(ds))
	}
}

func texts(ds []TextDelta) []string {
	var s []string
	for _, d := range ds {
		s = append(s, d.Text)
	}
	return s
}

func TestStopStrings(t *testing.T) {
	cases := []struct {
		name      string
		p         Params
		text      string
		steps     []int
		fr        ipc.FinishReason
		want      string
		wantStop  string
		wantAbort bool
	}{
		{"across tokens", Params{Stops: []string{"fox j"}}, "the quick fox jumps", []int{1}, ipc.FinishLength, "the quick ", "fox j", true},
		{"include", Params{Stops: []string{"fox"}, IncludeStop: true}, "the fox jumps", []int{2}, ipc.FinishLength, "the fox", "fox", true},
		{"first of two", Params{Stops: []string{"zz", "ju"}}, "the fox jumps", []int{3}, ipc.FinishLength, "the fox ", "ju", true},
		{"none matches", Params{Stops: []string{"cat"}}, "the fox", []int{1}, ipc.FinishLength, "the fox", "", false},
		{"held tail flushed at finish", Params{Stops: []string{"fox!"}}, "the fox", []int{1}, ipc.FinishLength, "the fox", "", false},
		{"min_tokens protects", Params{Stops: []string{"the"}, MinTokens: 3}, "the fox the end", []int{1}, ipc.FinishLength, "the fox ", "the", true},
		{"interval 5", Params{Stops: []string{"over"}, StreamInterval: 5}, "jumps over the dog", []int{1}, ipc.FinishLength, "jumps ", "over", true},
		{"stop on last token: no abort", Params{Stops: []string{"dog"}}, "lazy dog", []int{1}, ipc.FinishLength, "lazy ", "dog", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds, aborted := feed(t, tc.p, tc.text, tc.steps, tc.fr, nil)
			got, _ := join(ds)
			last := ds[len(ds)-1]
			if got != tc.want || last.StopReason.Text != tc.wantStop || aborted != tc.wantAbort || !last.Finished {
				t.Fatalf("got %q stop %q abort %v, want %q stop %q abort %v", got, last.StopReason.Text, aborted, tc.want, tc.wantStop, tc.wantAbort)
			}
			if tc.wantStop != "" && last.FinishReason != ipc.FinishStop {
				t.Fatalf("finish %v", last.FinishReason)
			}
		})
	}
}

func TestEOSNotInText(t *testing.T) {
	for _, include := range []bool{false, true} {
		ds, _ := feed(t, Params{IncludeStop: include, EOSIDs: []int32{eos}}, "hi", []int{1}, ipc.FinishStop, nil)
		got, n := join(ds)
		want := "hi"
		if include {
			want = "hi" // skip_special is false here; EOS text only with include_stop_str_in_output
			want += "</s>"
		}
		last := ds[len(ds)-1]
		if got != want || n != 3 || !last.StopReason.IsToken || last.StopReason.Token != eos {
			t.Fatalf("include=%v: text %q tokens %d stop %+v", include, got, n, last.StopReason)
		}
	}
}

func TestStopOnOrdinaryTokenKeepsText(t *testing.T) {
	// a grammar that completes finishes with FinishStop on a normal token
	st := New(byteTok{}, Params{EOSIDs: []int32{eos}})
	d, _ := st.Process(&ipc.Output{NewTokenIDs: []int32{'o', 'k'}, FinishReason: ipc.FinishStop, StopReason: -1}, false)
	if d == nil || d.Text != "ok" || d.StopReason.IsToken {
		t.Fatalf("delta %+v", d)
	}
}

func TestFailFlushes(t *testing.T) {
	st := New(byteTok{}, Params{StreamInterval: 100, Stops: []string{"xyz"}})
	ids := byteTok{}.Encode("hello wx", false)
	var got string
	for _, id := range ids {
		if d, _ := st.Process(&ipc.Output{NewTokenIDs: []int32{id}}, false); d != nil {
			got += d.Text
		}
	}
	d := st.Fail("engine down")
	got += d.Text
	if got != "hello wx" || d.FinishReason != ipc.FinishError || d.Error != "engine down" || !d.Finished || d.NumTokens != len(ids) {
		t.Fatalf("fail delta: %q %+v", got, d)
	}
	if st.Fail("again") != nil {
		t.Fatal("second Fail must return nil")
	}
	if d, _ := st.Process(&ipc.Output{NewTokenIDs: []int32{'a'}}, false); d != nil {
		t.Fatal("output after finish must be ignored")
	}
}

func TestFinalOnly(t *testing.T) {
	ds, _ := feed(t, Params{FinalOnly: true, Logprobs: true}, "abc def", []int{2}, ipc.FinishLength, nil)
	if len(ds) != 1 || ds[0].Text != "abc def" || len(ds[0].TokenIDs) != 7 || !ds[0].Finished {
		t.Fatalf("final-only deltas %+v", ds)
	}
}

// BenchmarkProcess measures one token through the output state (detok,
// stop strings, interval 1).
//
//	go test -run XXX -bench Process ./outputproc/
func BenchmarkProcess(b *testing.B) {
	st := New(byteTok{}, Params{StreamInterval: 1, Stops: []string{"never matches"}})
	out := &ipc.Output{NewTokenIDs: []int32{'a'}}
	b.ReportAllocs()
	for b.Loop() {
		st.Process(out, false)
	}
}

// FuzzSplits checks that any split of the same tokens into engine steps, at
// any stream interval and with any hold pattern, yields the same text and
// token count, and that stop strings cut at the same place.
func FuzzSplits(f *testing.F) {
	f.Add("hello world, the end", uint8(3), uint8(2), uint16(0x0f0f), "ld, t")
	f.Add("ünïcödé ✓ text", uint8(1), uint8(1), uint16(0), "")
	f.Add("aaaaab", uint8(7), uint8(4), uint16(0xffff), "aab")
	f.Fuzz(func(t *testing.T, text string, step, interval uint8, holdMask uint16, stop string) {
		if len(text) == 0 || len(text) > 200 {
			return
		}
		var stops []string
		if stop != "" {
			stops = []string{stop}
		}
		ref, _ := feed(t, Params{StreamInterval: 1, Stops: stops}, text, []int{1}, ipc.FinishLength, nil)
		refText, refN := join(ref)
		steps := []int{int(step%5) + 1, int(step%3) + 1}
		got, _ := feed(t, Params{StreamInterval: int(interval % 12), Stops: stops}, text, steps, ipc.FinishLength,
			func(i int) bool { return holdMask&(1<<(i%16)) != 0 })
		gotText, gotN := join(got)
		if gotText != refText {
			t.Fatalf("text %q, want %q", gotText, refText)
		}
		if stop == "" && gotN != refN {
			t.Fatalf("tokens %d, want %d", gotN, refN)
		}
		if !got[len(got)-1].Finished {
			t.Fatal("last delta not finished")
		}
	})
}
