package mapfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMap(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.bin")
	if err := os.WriteFile(path, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, err := Map(path, 8)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "0123456789" {
		t.Errorf("mapped %q", data)
	}
	if err := Unmap(data); err != nil {
		t.Error(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		min  int64
		want string
	}{
		{path, 11, "10 bytes, shorter than the 11-byte minimum"},
		{empty, 0, "0 bytes, shorter than the 1-byte minimum"},
		{filepath.Join(dir, "missing"), 0, "open "},
		{dir, 0, "mmap "},
	} {
		if _, err := Map(c.path, c.min); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Map(%s, %d) = %v, want an error containing %q", c.path, c.min, err, c.want)
		}
	}
}
