//go:build amd64 && !purego

package peak

// maddLoop runs n iterations of 8 VPMADDUBSW and 8 VPMADDWD (256 int8
// multiply-adds).
func maddLoop(n int)

// fmaLoop runs n iterations of 10 float32 FMAs (80 multiply-adds).
func fmaLoop(n int)

// maddOnlyLoop runs n iterations of 8 VPMADDUBSW (256 int8 multiply-adds).
func maddOnlyLoop(n int)

// available reports whether the loops may run.
const available = true

// chainLoop runs n iterations of 8 rows' VPMADDUBSW, VPMADDWD, VPADDD
// (256 int8 multiply-adds into int32 accumulators).
func chainLoop(n int)

// ktLoop runs n iterations of 2 rows' 8 VPMADDUBSW, 7 VPADDW, VPMADDWD,
// VPADDD (512 int8 multiply-adds, the transposed Q4_K tiles' form).
func ktLoop(n int)
