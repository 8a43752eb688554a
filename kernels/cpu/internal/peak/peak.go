// Package peak measures the arithmetic peaks of this machine's cores that
// bound the CPU kernels of package cpu (the compute roofline): int8
// multiply-adds as the int8 kernels issue them (VPMADDUBSW + VPMADDWD per
// 32) and float32 FMAs, per CPU-second of one thread.
//
//	go test ./kernels/cpu/internal/peak -bench . -benchtime 20x
package peak
