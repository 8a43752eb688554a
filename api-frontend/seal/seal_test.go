package seal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestSealOpen(t *testing.T) {
	key := bytes.Repeat([]byte{7}, KeySize)
	s, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := New(bytes.Repeat([]byte{8}, KeySize))
	sealed := s.Seal("the model thought <think> about it")
	tamper := []byte(sealed)
	tamper[len(tamper)-3] ^= 1
	tests := []struct {
		name    string
		s       *Sealer
		in      string
		want    string
		wantErr bool
	}{
		{"round trip", s, sealed, "the model thought <think> about it", false},
		{"empty text", s, s.Seal(""), "", false},
		{"other key", other, sealed, "", true},
		{"tampered", s, string(tamper), "", true},
		{"not base64", s, "!!!", "", true},
		{"too short", s, "czE", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.s.Open(tc.in)
			if tc.wantErr {
				if !errors.Is(err, ErrOpen) {
					t.Fatalf("Open = %q, %v; want ErrOpen", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Open = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := New([]byte("short")); err == nil {
		t.Error("New accepted a short key")
	}
}

func TestLoadOrCreateKeyRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "responses.key")
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := LoadOrCreateKey(path)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		}()
	}
	wg.Wait()
	for i := range keys {
		if !bytes.Equal(keys[i], keys[0]) || len(keys[i]) != KeySize {
			t.Fatalf("creator %d got another key", i)
		}
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", st.Mode(), err)
	}
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKey(path); err == nil {
		t.Error("a short key file was accepted")
	}
}

func FuzzOpen(f *testing.F) {
	s, _ := New(bytes.Repeat([]byte{1}, KeySize))
	f.Add(s.Seal("hello"))
	f.Add("")
	f.Add("czE")
	f.Fuzz(func(t *testing.T, in string) {
		if got, err := s.Open(in); err == nil {
			if s2, err2 := s.Open(s.Seal(got)); err2 != nil || s2 != got {
				t.Fatalf("reseal of %q broke: %q %v", got, s2, err2)
			}
		}
	})
}
