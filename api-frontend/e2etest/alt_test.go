package e2etest

import (
	"strings"
	"testing"
)

// TestBodyEnd checks benchmarkAlt's reader of chunked responses: the
// terminator is found however the response is cut into reads, not
// before, and a status other than 200 is an error.
func TestBodyEnd(t *testing.T) {
	const resp = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"6\r\ndata: \r\n" + "e\r\ndata: [DONE]\n\n\r\n" + "0\r\n\r\n"
	for _, tc := range []struct {
		name string
		cuts []int // read boundaries
	}{
		{"one read", nil},
		{"each byte", func() []int {
			var c []int
			for i := 1; i < len(resp); i++ {
				c = append(c, i)
			}
			return c
		}()},
		{"terminator split", []int{len(resp) - 4}},
		{"last byte alone", []int{len(resp) - 1}},
		{"head alone", []int{strings.Index(resp, "\r\n\r\n") + 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e bodyEnd
			for round := 0; round < 2; round++ { // a kept connection's second response
				e.reset()
				prev := 0
				for i, cut := range append(tc.cuts, len(resp)) {
					done, err := e.feed([]byte(resp[prev:cut]))
					if err != nil {
						t.Fatal(err)
					}
					if last := i == len(tc.cuts); done != last {
						t.Fatalf("round %d: read %d (bytes %d..%d): done %v", round, i, prev, cut, done)
					}
					prev = cut
				}
			}
		})
	}
	var e bodyEnd
	e.reset()
	if _, err := e.feed([]byte("HTTP/1.1 400 Bad Request\r\n\r\n")); err == nil {
		t.Fatal("a 400 was taken")
	}
}

// TestMedian checks the median of odd and even counts.
func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
