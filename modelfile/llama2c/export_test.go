package llama2c

import (
	"encoding/binary"
	"math"
	"testing"
)

// TestRotateHalf checks the permutation on one head of dimension 4 with two
// columns: rows (0,1,2,3) become (0,2,1,3).
func TestRotateHalf(t *testing.T) {
	rows, cols := 8, 2 // two heads of dimension 4
	w := make([]byte, rows*cols*4)
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			binary.LittleEndian.PutUint32(w[(r*cols+c)*4:], math.Float32bits(float32(10*r+c)))
		}
	}
	out := RotateHalf(w, rows, cols, 2)
	want := []int{0, 2, 1, 3, 4, 6, 5, 7} // destination row i holds source row want[i]
	for r, src := range want {
		for c := 0; c < cols; c++ {
			got := math.Float32frombits(binary.LittleEndian.Uint32(out[(r*cols+c)*4:]))
			if got != float32(10*src+c) {
				t.Fatalf("row %d col %d = %v, want source row %d", r, c, got, src)
			}
		}
	}
}
