//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// hasK4V reports whether the AVX512_VNNI Q4_K tiles of k4v_amd64.s may
// run: besides AVX-512 and VNNI they permute bytes with AVX512_VBMI's
// VPERMT2B.
var hasK4V = hasVNNI && cpu.X86.HasAVX512VBMI
