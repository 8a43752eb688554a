package cpu

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluice-llm/sluice/kernels"
	"golang.org/x/sys/unix"
)

// TestHugeArena checks the arena's copies: 2 MiB-aligned mappings, copies
// that do not overlap, zeroed, and a repacked weight in them that
// multiplies as one in the Go heap does.
func TestHugeArena(t *testing.T) {
	var a hugeArena
	defer a.free()
	var got [][]byte
	for _, n := range []int{1, 4095, 4096, 4097, hugePage + 1, hugeChunk + 5, 3} {
		c := a.alloc(n)
		if c == nil {
			t.Skip("no transparent huge pages here")
		}
		if len(c) != n || cap(c) != n {
			t.Fatalf("alloc(%d): len %d cap %d", n, len(c), cap(c))
		}
		if !slices.Equal(c, make([]byte, n)) {
			t.Fatalf("alloc(%d): not zeroed", n)
		}
		for i := range c {
			c[i] = byte(len(got) + 1)
		}
		got = append(got, c)
	}
	for i, c := range got {
		if bytes.IndexFunc(c, func(r rune) bool { return r != rune(i+1) }) >= 0 {
			t.Fatalf("copy %d was overwritten by a later one", i)
		}
	}
	for _, m := range a.maps {
		if p := uintptrOf(m); p%hugePage != 0 || len(m)%hugePage != 0 {
			t.Fatalf("mapping at %#x, %d bytes: not 2 MiB-aligned", p, len(m))
		}
	}
}

// TestHugeWeights checks PrepareMatMul's weight copies in the arena: a
// repacked Q4_K weight and copied Q6_K/Q8_0/F16 weights (keepRows too)
// multiply bit for bit as the file's bytes do, noHuge keeps them in the
// Go heap / the file's bytes, and Close unmaps them. (Whether the kernel
// grants 2 MiB pages is its choice: AnonHugePages in smaps_rollup,
// checked on the real model in docs/BENCHMARKS.md.)
func TestHugeWeights(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 kernels on this machine or build")
	}
	r := rand.New(rand.NewPCG(7, 11))
	cases := []struct {
		dt       kernels.DType
		out, in  int
		keepRows bool
	}{
		{kernels.Q4_K, 1100, 1024, false},
		{kernels.Q6_K, 1100, 1024, false},
		{kernels.Q6_K, 1100, 1024, true},
		{kernels.Q8_0, 700, 1024, false},
		{kernels.F16, 300, 1024, false},
		{kernels.Q6_K, 3, 256, false}, // under copyHugeMin: stays
	}
	for _, noHuge := range []bool{false, true} {
		b := New(Options{Threads: 2, QuantizeActivations: true})
		b.noHuge = noHuge
		var copies [][]byte
		for _, c := range cases {
			data := randBlocks(r, c.dt, c.out, c.in)
			file, _ := kernels.NewHostWeight(c.dt, c.out, c.in, bytes.Clone(data))
			w, _ := kernels.NewHostWeight(c.dt, c.out, c.in, bytes.Clone(data))
			if err := b.PrepareMatMul(w, c.keepRows); err != nil {
				t.Fatal(err)
			}
			small := len(data) < copyHugeMin
			inArena := !noHuge && !small && !b.huge.off
			if c.dt != kernels.Q4_K && w.Copied != inArena {
				t.Fatalf("%v %dx%d noHuge=%v: Copied %v, want %v", c.dt, c.out, c.in, noHuge, w.Copied, inArena)
			}
			if c.dt != kernels.Q4_K && !bytes.Equal(w.Q, data) {
				t.Fatalf("%v %dx%d: the copy differs from the file's bytes", c.dt, c.out, c.in)
			}
			if inArena {
				copies = append(copies, w.Q)
			}
			for _, n := range []int{1, 2, 7, 16, 17} {
				x := &kernels.Host{R: n, C: c.in, F: randF(r, n*c.in)}
				want := b.Alloc(n, c.out).(*kernels.Host)
				got := b.Alloc(n, c.out).(*kernels.Host)
				b.MatMul(want, x, file, n)
				b.MatMul(got, x, w, n)
				if !slices.Equal(got.F[:n*c.out], want.F[:n*c.out]) {
					t.Fatalf("%v %dx%d noHuge=%v, %d rows: products differ from the file's weight", c.dt, c.out, c.in, noHuge, n)
				}
			}
		}
		if noHuge && len(b.huge.maps) != 0 {
			t.Fatalf("noHuge: %d mappings made", len(b.huge.maps))
		}
		b.Close()
		for _, q := range copies {
			// madvise fails with ENOMEM on an unmapped range
			if err := unix.Madvise(q[:1], unix.MADV_NORMAL); err == nil {
				t.Fatalf("a weight copy at %#x is still mapped after Close", uintptrOf(q))
			}
		}
	}
}

// TestHugeSpare checks the bound on optional copies: half the machine's
// memory, counting what the arena has handed out.
func TestHugeSpare(t *testing.T) {
	var a hugeArena
	if !a.spare(1 << 20) {
		t.Fatal("spare(1 MiB) = false on a fresh arena")
	}
	if a.ram <= 0 {
		t.Fatalf("ram = %d", a.ram)
	}
	if a.spare(a.ram/2 + 1) {
		t.Errorf("spare(ram/2+1) = true; want false")
	}
	a.used = a.ram/2 - 100
	if a.spare(101) || !a.spare(100) {
		t.Errorf("spare at used = ram/2-100: 101 → %v, 100 → %v; want false, true", a.spare(101), a.spare(100))
	}
}
