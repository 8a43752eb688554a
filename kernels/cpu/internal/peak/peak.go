// Package peak measures the arithmetic peaks of this machine's cores that
// bound the CPU kernels of package cpu (the compute roofline): int8
// multiply-adds as the int8 kernels issue them (VPMADDUBSW + VPMADDWD per
// 32; the ×8 tiles' chain with its VPADDD; the transposed Q4_K tiles'
// chain of 8 VPMADDUBSW, 7 VPADDW, one VPMADDWD and one VPADDD per 256)
// and float32 FMAs, per CPU-second of one thread, all from registers.
//
//	go test ./kernels/cpu/internal/peak -bench . -benchtime 20x
package peak
