package quant

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestRepackQ4K checks the word-wise RepackQ4K against its byte-wise
// definition, in place and not, for 0–9 blocks with and without a ragged
// tail (left as dst had it), all-0x00/0xff and random bytes, and that
// UnrepackQ4K restores the file's bytes.
func TestRepackQ4K(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 1))
	fills := []struct {
		name string
		f    func(i int) byte
	}{
		{"zero", func(int) byte { return 0 }},
		{"ones", func(int) byte { return 0xff }},
		{"alternate", func(i int) byte { return []byte{0x0f, 0xf0, 0x5a, 0xa5}[i%4] }},
		{"random", func(int) byte { return byte(rng.Uint32()) }},
	}
	for _, fill := range fills {
		for blocks := 0; blocks <= 9; blocks++ {
			for _, tail := range []int{0, 1, 77} {
				src := make([]byte, blocks*Q4KBlockBytes+tail)
				for i := range src {
					src[i] = fill.f(i)
				}
				want := bytes.Repeat([]byte{0xcd}, len(src))
				repackQ4KBytes(want, src)
				got := bytes.Repeat([]byte{0xcd}, len(src))
				RepackQ4K(got, src)
				if !bytes.Equal(got, want) {
					t.Fatalf("%s, %d blocks + %d: RepackQ4K differs from the byte-wise definition", fill.name, blocks, tail)
				}
				in := bytes.Clone(src)
				RepackQ4K(in, in)
				if !bytes.Equal(in[:blocks*Q4KBlockBytes], want[:blocks*Q4KBlockBytes]) {
					t.Fatalf("%s, %d blocks + %d: in place differs", fill.name, blocks, tail)
				}
				UnrepackQ4K(in, in)
				if !bytes.Equal(in, src) {
					t.Fatalf("%s, %d blocks + %d: UnrepackQ4K does not restore the file's bytes", fill.name, blocks, tail)
				}
			}
		}
	}
}

// FuzzRepackQ4K checks RepackQ4K against repackQ4KBytes and the round
// trip on arbitrary bytes.
func FuzzRepackQ4K(f *testing.F) {
	f.Add(bytes.Repeat([]byte{0x12, 0x34, 0x56, 0x78}, 72))
	f.Add(make([]byte, Q4KBlockBytes+5))
	f.Fuzz(func(t *testing.T, src []byte) {
		want := make([]byte, len(src))
		got := make([]byte, len(src))
		repackQ4KBytes(want, src)
		RepackQ4K(got, src)
		if !bytes.Equal(got, want) {
			t.Fatalf("RepackQ4K differs from the byte-wise definition on %d bytes", len(src))
		}
		UnrepackQ4K(got, got)
		n := len(src) / Q4KBlockBytes * Q4KBlockBytes
		if !bytes.Equal(got[:n], src[:n]) {
			t.Fatal("round trip differs")
		}
	})
}

// BenchmarkRepackQ4K compares the word-wise repack with the byte-wise
// definition on 8 MiB of blocks.
func BenchmarkRepackQ4K(b *testing.B) {
	src := make([]byte, 58254*Q4KBlockBytes)
	for i := range src {
		src[i] = byte(i * 131)
	}
	dst := make([]byte, len(src))
	for _, c := range []struct {
		name string
		f    func(dst, src []byte)
	}{{"words", RepackQ4K}, {"bytes", repackQ4KBytes}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				c.f(dst, src)
			}
		})
	}
}
