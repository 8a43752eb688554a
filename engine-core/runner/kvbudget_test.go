package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/modelfile/demo"
)

func TestDefaultKVBudget(t *testing.T) {
	const MiB = 1 << 20
	cases := []struct {
		name                     string
		avail, weights, perBlock int64
		blockSize, maxLen, seqs  int
		want                     int64
		why                      string
	}{
		// 4 seqs × 2048/16 blocks × 1 MiB = 512 MiB fits half of 8 GiB − 1 GiB
		{"need fits", 8192 * MiB, 1024 * MiB, MiB, 16, 2048, 4, 512 * MiB, "needs 512 MiB"},
		// 256 × 8192/16 × 1 MiB = 128 GiB: capped at (8 − 1) / 2 GiB
		{"capped by memory", 8192 * MiB, 1024 * MiB, MiB, 16, 8192, 256, 3584 * MiB, "50% of MemAvailable 8192 MiB after 1024 MiB of mapped weights"},
		// weights larger than what is available: still one block
		{"no memory", 1024 * MiB, 4096 * MiB, MiB, 16, 2048, 4, MiB, "50% of MemAvailable"},
		{"ragged max len", 8192 * MiB, 0, MiB, 16, 17, 1, 2 * MiB, "needs 2 MiB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, why := DefaultKVBudget(c.avail, c.weights, c.perBlock, c.blockSize, c.maxLen, c.seqs)
			if got != c.want || !strings.Contains(why, c.why) {
				t.Errorf("got %d MiB (%q), want %d MiB (%q)", got/MiB, why, c.want/MiB, c.why)
			}
		})
	}
}

func TestParseMemAvailable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "meminfo"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseMemAvailable(b)
	if err != nil || got != 19723404<<10 {
		t.Errorf("testdata/meminfo: %d, %v; want %d", got, err, int64(19723404)<<10)
	}
	for name, in := range map[string]string{
		"missing": "MemTotal: 1 kB\n", "bad number": "MemAvailable: x kB\n", "negative": "MemAvailable: -5 kB\n", "overflows bytes": "MemAvailable: 10000000000000000 kB\n", "empty": "",
	} {
		if _, err := parseMemAvailable([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzParseMemAvailable(f *testing.F) {
	f.Add([]byte("MemTotal:       24000000 kB\nMemAvailable:   19723404 kB\n"))
	f.Add([]byte("MemAvailable:"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := parseMemAvailable(b); err == nil && v < 0 {
			t.Fatalf("negative %d", v)
		}
	})
}

// TestKVCacheDefaults checks --kv-cache-dtype auto (float32 for an F32
// model, float16 for a quantized one) and the default budget: what the
// sequences need when memory allows, capped by memory otherwise.
func TestKVCacheDefaults(t *testing.T) {
	const MiB = 1 << 20
	dir := t.TempDir()
	for _, f := range []string{demo.FormatGGUF, demo.FormatGGUFQ8_0} {
		if err := demo.Generate(filepath.Join(dir, f), "tiny", 1, f); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		format  string
		avail   int64
		dtype   string
		blocks  int
		memErr  bool
		wantErr bool
	}{
		// tiny: 2 layers × 2 × 32 kv floats × 16 positions = 8 KiB (F32)
		// per block; 2 seqs × 2048/16 blocks
		{demo.FormatGGUF, 64 << 30, "float32", 256, false, false},
		{demo.FormatGGUFQ8_0, 64 << 30, "float16", 256, false, false},
		// 2 MiB available: half of what is left after the weights
		{demo.FormatGGUF, 2 * MiB, "float32", -1, false, false},
		{demo.FormatGGUF, 0, "", 0, true, true},
	}
	for _, c := range cases {
		t.Run(c.format, func(t *testing.T) {
			mem := func() (int64, error) {
				if c.memErr {
					return 0, errors.New("no meminfo")
				}
				return c.avail, nil
			}
			r, err := New(Config{Model: filepath.Join(dir, c.format, demo.GGUFFile), MaxSeqs: 2, Threads: 1, MemAvailable: mem})
			if c.wantErr {
				if err == nil || !strings.Contains(err.Error(), "--kv-cache-memory") {
					r.Close()
					t.Fatalf("want an error naming --kv-cache-memory, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			info := r.Info()
			want := c.blocks
			if want < 0 {
				// the weights read from the mapped file count out; copies
				// made at load (the F32 file's decoded matrices) are
				// resident already
				want = int((c.avail - (info.WeightBytes - r.m.CopiedWeightBytes())) / 2 / r.KVBytesPerBlock())
			}
			if info.KVDType != c.dtype || info.NumBlocks != want || info.KVCacheBytes != int64(want)*r.KVBytesPerBlock() {
				t.Errorf("info %+v; want %s, %d blocks", info, c.dtype, want)
			}
		})
	}
}

// TestKVBudgetCopiedWeights loads a gpt-oss checkpoint in the published
// safetensors layout, whose experts the loader repacks into memory of its
// own, with MemAvailable equal to the file's weights: the default budget
// must count out only the memory-mapped weights (the copied experts are
// resident already), where counting all of them left one block and the
// real-size model could not start.
func TestKVBudgetCopiedWeights(t *testing.T) {
	dir := t.TempDir()
	s := demo.RealShapes["gpt-oss-tiny"]
	s.Vocab = 1024
	if err := demo.GenerateHFShape(dir, s, 1, demo.HFShardBytes); err != nil {
		t.Fatal(err)
	}
	var avail int64
	mem := func() (int64, error) { return avail, nil }
	// first load: the weights' size
	r, err := New(Config{Model: dir, MaxSeqs: 2, Threads: 1, MaxModelLen: 64, NumBlocks: 8})
	if err != nil {
		t.Fatal(err)
	}
	weights, copied := r.m.WeightBytes(), r.m.CopiedWeightBytes()
	r.Close()
	if copied <= 0 || copied >= weights {
		t.Fatalf("copied %d of %d weight bytes: want the experts", copied, weights)
	}
	avail = weights
	r, err = New(Config{Model: dir, MaxSeqs: 2, Threads: 1, MaxModelLen: 4096, MemAvailable: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	info := r.Info()
	per := info.KVCacheBytes / int64(info.NumBlocks)
	if want := int(copied / 2 / per); info.NumBlocks != want || want < 2 {
		t.Errorf("%d KV blocks (%s), want %d: half of the %d copied bytes", info.NumBlocks, info.KVBudget, want, copied)
	}
}

// TestKVBudgetBackendCopies loads a dense Q4_K_M GGUF, whose Q4_K weights
// the CPU backend repacks (and, where huge pages are to be had, whose
// other large weights it copies into its arena), with MemAvailable equal
// to the file's weights: those copies are resident already, so the
// default budget must count out only what still reads the mapped file.
// Before, the model reported no copied bytes, and an 8B F16 file copied
// into the arena up to half the machine's memory left a budget of one
// block: the engine would not start.
func TestKVBudgetBackendCopies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.gguf")
	s := demo.RealShapes["1b-v32k"]
	s.Dim, s.Hidden, s.Layers, s.Heads, s.KVHeads, s.HeadDim, s.Vocab = 256, 512, 2, 4, 2, 64, 1024
	if err := demo.GenerateShape(path, s, 1, demo.FormatGGUFQ4KM); err != nil {
		t.Fatal(err)
	}
	var avail int64
	mem := func() (int64, error) { return avail, nil }
	r, err := New(Config{Model: path, MaxSeqs: 2, Threads: 1, MaxModelLen: 64, NumBlocks: 8})
	if err != nil {
		t.Fatal(err)
	}
	weights, copied := r.m.WeightBytes(), r.m.CopiedWeightBytes()
	r.Close()
	if copied <= 0 || copied > weights {
		t.Fatalf("copied %d of %d weight bytes: want at least the repacked Q4_K weights", copied, weights)
	}
	avail = weights
	r, err = New(Config{Model: path, MaxSeqs: 64, Threads: 1, MaxModelLen: 4096, MemAvailable: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	info := r.Info()
	per := info.KVCacheBytes / int64(info.NumBlocks)
	if want := int(max(copied/2/per, 1)); info.NumBlocks != want || want < 2 {
		t.Errorf("%d KV blocks (%s), want %d: half of the %d copied bytes", info.NumBlocks, info.KVBudget, want, copied)
	}
}
