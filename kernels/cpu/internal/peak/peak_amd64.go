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
