package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sample() []Tensor {
	return []Tensor{
		{Name: "a.weight", DType: "F32", Shape: []int{2, 3}, Data: F32Bytes([]float32{1, 2, 3, 4, 5, 6})},
		{Name: "b", DType: "BF16", Shape: []int{2}, Data: BF16Bytes([]float32{1.5, -2})},
	}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "model.safetensors")
	var buf bytes.Buffer
	if err := Write(&buf, sample(), map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := OpenModel(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b, ti, _, err := m.TensorData("a.weight")
	if err != nil {
		t.Fatal(err)
	}
	if ti.DType != "F32" || len(ti.Shape) != 2 || ti.Shape[1] != 3 || !bytes.Equal(b, sample()[0].Data) {
		t.Errorf("a.weight = %+v %v", ti, b)
	}
	b, _, _, _ = m.TensorData("b")
	if binary.LittleEndian.Uint16(b) != 0x3fc0 {
		t.Errorf("bf16 1.5 = %#x", binary.LittleEndian.Uint16(b))
	}
	if _, _, _, err := m.TensorData("nope"); err == nil {
		t.Error("missing tensor: want error")
	}
}

func TestSharded(t *testing.T) {
	dir := t.TempDir()
	ts := sample()
	for i, tt := range ts {
		var buf bytes.Buffer
		Write(&buf, []Tensor{tt}, nil)
		os.WriteFile(filepath.Join(dir, []string{"s1.safetensors", "s2.safetensors"}[i]), buf.Bytes(), 0o644)
	}
	os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(`{"weight_map":{"a.weight":"s1.safetensors","b":"s2.safetensors"}}`), 0o644)
	m, err := OpenModel(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, n := range []string{"a.weight", "b"} {
		if _, ok := m.Tensor(n); !ok {
			t.Errorf("tensor %s not found", n)
		}
	}
}

func TestCorrupt(t *testing.T) {
	var buf bytes.Buffer
	Write(&buf, sample(), nil)
	good := buf.Bytes()
	cases := map[string][]byte{
		"short":       good[:5],
		"truncated":   good[:len(good)-3],
		"huge header": append([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, good[8:]...),
		"bad shape":   []byte(string(good[:8]) + strings.Replace(string(good[8:]), `[2,3]`, `[2,4]`, 1)),
	}
	for name, data := range cases {
		if _, err := Parse(data); err == nil {
			t.Errorf("%s: want error", name)
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "model.safetensors")
	os.WriteFile(p, good[:len(good)-3], 0o644)
	_, err := Open(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "a.weight") && !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("truncated file error should name file and tensor: %v", err)
	}
}

// FuzzHeader feeds arbitrary bytes to the header parser: it must return
// an error or a File whose every tensor lies inside the data.
func FuzzHeader(f *testing.F) {
	var buf bytes.Buffer
	Write(&buf, sample(), map[string]string{"k": "v"})
	f.Add(buf.Bytes())
	f.Add([]byte{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '})
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := Parse(data)
		if err != nil {
			return
		}
		for _, n := range sf.Names() {
			b, ti, err := sf.TensorData(n)
			if err != nil || int64(len(b)) != ti.End-ti.Begin {
				t.Fatalf("tensor %s: %v", n, err)
			}
		}
	})
}

// TestWriteStream checks that a file streamed in pieces is byte for byte
// the one Write makes from whole tensors, and that a tensor given the
// wrong number of bytes, an unknown dtype or a name used twice is refused
// with an error naming the tensor.
func TestWriteStream(t *testing.T) {
	ts := sample()
	var want bytes.Buffer
	if err := Write(&want, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	infos := make([]Tensor, len(ts))
	for i, tt := range ts {
		infos[i] = Tensor{Name: tt.Name, DType: tt.DType, Shape: tt.Shape}
	}
	var got bytes.Buffer
	err := WriteStream(&got, infos, map[string]string{"format": "pt"}, func(i int, w io.Writer) error {
		for _, c := range ts[i].Data { // one byte at a time
			if _, err := w.Write([]byte{c}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("streamed file differs from Write's (%d vs %d bytes)", got.Len(), want.Len())
	}
	for _, c := range []struct {
		name    string
		tensors []Tensor
		data    func(i int, w io.Writer) error
		want    string
	}{
		{"short", infos, func(i int, w io.Writer) error { _, err := w.Write(ts[i].Data[1:]); return err },
			`"a.weight": F32 [2 3] needs 24 bytes, got 23`},
		{"long", infos, func(i int, w io.Writer) error { _, err := w.Write(append(ts[i].Data, 0)); return err },
			`"a.weight": F32 [2 3] needs 24 bytes, got 25`},
		{"dtype", []Tensor{{Name: "x", DType: "Q4", Shape: []int{2}}}, nil, `"x": unknown dtype "Q4"`},
		{"negative shape", []Tensor{{Name: "x", DType: "F32", Shape: []int{-2}}}, nil, `"x": bad shape [-2]`},
		{"duplicate", []Tensor{infos[1], infos[1]}, nil, `"b": name used twice`},
		{"data error", infos, func(int, io.Writer) error { return errors.New("disk full") }, `"a.weight": disk full`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := WriteStream(io.Discard, c.tensors, nil, c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want it to contain %s", err, c.want)
			}
		})
	}
}
