package stream

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll returns the data of every event in body, and the error that ended
// reading (nil for a clean EOF).
func readAll(r *Reader) ([]string, error) {
	var got []string
	for {
		data, err := r.Next()
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, string(data))
	}
}

func TestReaderEvents(t *testing.T) {
	long := strings.Repeat("x", 10000)
	tests := []struct {
		name string
		body string
		want []string
	}{
		{"basic", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []string{`{"a":1}`, "[DONE]"}},
		{"crlf", "data: one\r\n\r\ndata: two\r\n\r\n", []string{"one", "two"}},
		{"no space after colon", "data:x\n\n", []string{"x"}},
		{"comments and other fields", ": ping\n\nevent: message\nid: 7\ndata: d\nretry: 10\n\n", []string{"d"}},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"empty data", "data:\n\n", []string{""}},
		{"trailing event without blank line", "data: a\n\ndata: last", []string{"a", "last"}},
		{"trailing event with newline only", "data: a\n", []string{"a"}},
		{"blank lines only", "\n\n\n", nil},
		{"long line", "data: " + long + "\n\n", []string{long}},
		{"field without colon", "data\n\n", []string{""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, src := range []io.Reader{strings.NewReader(tc.body), iotest.OneByteReader(strings.NewReader(tc.body))} {
				got, err := readAll(NewReader(src, 16))
				if err != nil {
					t.Fatalf("Next: %v", err)
				}
				if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
					t.Fatalf("got %q, want %q", got, tc.want)
				}
			}
		})
	}
}

func TestReaderTruncatedBody(t *testing.T) {
	src := io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(io.ErrUnexpectedEOF))
	got, err := readAll(NewReader(src, 0))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v, want unexpected EOF", err)
	}
	if len(got) != 1 || got[0] != "a" {
		t.Fatalf("events before the error = %q, want [a]", got)
	}
}

func TestReaderReset(t *testing.T) {
	r := NewReader(strings.NewReader("data: half"), 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	r.Reset(strings.NewReader("data: fresh\n\n"))
	got, err := readAll(r)
	if err != nil || len(got) != 1 || got[0] != "fresh" {
		t.Fatalf("after Reset got %q, %v", got, err)
	}
}

// FuzzReader checks that any body, split into reads of any size, yields the
// same events as reading it in one piece, and never panics.
func FuzzReader(f *testing.F) {
	f.Add("data: a\n\ndata: b\r\n\r\n: c\n", 3)
	f.Add("data:\ndata:\n\n\n", 1)
	f.Add(strings.Repeat("data: yyyyyyyy\n", 20), 7)
	f.Fuzz(func(t *testing.T, body string, size int) {
		whole, err1 := readAll(NewReader(strings.NewReader(body), 1<<20))
		pieces, err2 := readAll(NewReader(iotest.HalfReader(strings.NewReader(body)), size%64))
		if err1 != nil || err2 != nil {
			t.Fatalf("errors %v, %v", err1, err2)
		}
		if len(whole) != len(pieces) {
			t.Fatalf("%d events whole, %d in pieces", len(whole), len(pieces))
		}
		for i := range whole {
			if whole[i] != pieces[i] {
				t.Fatalf("event %d: %q vs %q", i, whole[i], pieces[i])
			}
		}
	})
}

func BenchmarkReader(b *testing.B) {
	event := "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\" hello\",\"logprobs\":null,\"finish_reason\":null}]}\n\n"
	body := strings.Repeat(event, 100)
	src := strings.NewReader(body)
	r := NewReader(src, 4096)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(body)
		r.Reset(src)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}
