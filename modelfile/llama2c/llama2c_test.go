package llama2c

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/internal/testenv"
)

func header(vals ...int32) []byte {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return b
}

func TestAidreams(t *testing.T) {
	p := testenv.SharedFile(t, "aidreams260K/aidreams260K.bin")
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := f.Config
	if c.Dim != 64 || c.HiddenDim != 172 || c.Layers != 4 || c.Heads != 4 || c.KVHeads != 4 || c.VocabSize != 512 || c.SeqLen != 128 || !c.SharedClassifier {
		t.Fatalf("config %+v", c)
	}
	q, err := f.Tensor("model.layers.3.mlp.up_proj.weight")
	if err != nil || q.Rows != 172 || q.Cols != 64 {
		t.Fatalf("w3 = %+v, %v", q, err)
	}
	if _, err := f.Tensor("lm_head.weight"); err == nil {
		t.Error("shared classifier: lm_head should be absent")
	}
}

func TestLayoutAndErrors(t *testing.T) {
	// dim 4, hidden 8, 1 layer, 2 heads, 1 kv head, vocab -3 (separate classifier), seq 2
	h := header(4, 8, 1, 2, 1, -3, 2)
	c, _, err := ParseHeader(h)
	if err != nil || c.SharedClassifier || c.VocabSize != 3 || c.KVDim() != 2 {
		t.Fatalf("header: %+v %v", c, err)
	}
	floats := 3*4 + 4 + 4*4 + 2*4 + 2*4 + 4*4 + 4 + 8*4 + 4*8 + 8*4 + 4 + 2*2 + 3*4
	data := append(h, make([]byte, 4*floats)...)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	lm, _ := f.Tensor("lm_head.weight")
	if lm.Rows != 3 || len(lm.Data) != 48 || &lm.Data[len(lm.Data)-1] != &data[len(data)-1] {
		t.Error("lm_head should be the last 3×4 floats")
	}
	_, err = Parse(data[:len(data)-1])
	if err == nil || !strings.Contains(err.Error(), "lm_head.weight [3 × 4]") {
		t.Errorf("truncated: want error naming the tensor and shape, got %v", err)
	}
	for _, bad := range [][]byte{h[:10], header(0, 8, 1, 2, 1, 3, 2), header(5, 8, 1, 2, 1, 3, 2), header(4, 8, 1, 2, 3, 3, 2)} {
		if _, _, err := ParseHeader(bad); err == nil {
			t.Errorf("header %v: want error", bad)
		}
	}
}

// FuzzHeader checks that header and layout parsing never panic and that a
// parsed file's tensors lie inside the data.
func FuzzHeader(f *testing.F) {
	f.Add(append(header(4, 8, 1, 2, 1, -3, 2), make([]byte, 1000)...))
	f.Add(header(magicAK42, 1, 4, 8, 1, 2, 1, 3, 2, 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		for _, n := range file.Names() {
			tt, _ := file.Tensor(n)
			if len(tt.Data) != tt.Rows*tt.Cols*4 {
				t.Fatalf("tensor %s: %d bytes for %d×%d", n, len(tt.Data), tt.Rows, tt.Cols)
			}
		}
	})
}
