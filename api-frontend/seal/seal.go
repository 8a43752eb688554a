// Package seal encrypts reasoning text that the frontend hands to clients
// and reads it back when they return it: the Responses API's
// encrypted_content of reasoning items and the Messages API's thinking
// signature.
//
// A Sealer is AES-256-GCM with a per-deployment key; a sealed value is
// base64url("s1" || nonce || ciphertext+tag) of the text, so only frontends
// holding the same key can open it, and any change to it fails
// authentication. The key lives in a file (LoadOrCreateKey): every frontend
// of a host shares the file in the runtime directory; across hosts, give all
// frontends the same --responses-key-file (docs/DEPLOY.md).
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// KeySize is the key length in bytes (AES-256).
const KeySize = 32

// prefix versions the sealed format.
const prefix = "s1"

// ErrOpen is returned by Open when a value was not sealed with this key or
// was altered.
var ErrOpen = errors.New("seal: value was not produced by this deployment or was altered")

// Sealer seals and opens text with one key; safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// New returns a Sealer for a KeySize-byte key.
func New(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("seal: key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("create cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("create GCM: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts text.
func (s *Sealer) Seal(text string) string {
	ns := s.aead.NonceSize()
	buf := make([]byte, len(prefix)+ns, len(prefix)+ns+len(text)+s.aead.Overhead())
	copy(buf, prefix)
	if _, err := rand.Read(buf[len(prefix):]); err != nil {
		panic(fmt.Sprintf("seal: read random nonce: %v", err)) // crypto/rand never fails on Linux
	}
	out := s.aead.Seal(buf, buf[len(prefix):], []byte(text), []byte(prefix))
	return base64.RawURLEncoding.EncodeToString(out)
}

// Open decrypts a value made by Seal with the same key.
func (s *Sealer) Open(sealed string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(sealed)
	ns := s.aead.NonceSize()
	if err != nil || len(raw) < len(prefix)+ns+s.aead.Overhead() || string(raw[:len(prefix)]) != prefix {
		return "", ErrOpen
	}
	plain, err := s.aead.Open(nil, raw[len(prefix):len(prefix)+ns], raw[len(prefix)+ns:], []byte(prefix))
	if err != nil {
		return "", ErrOpen
	}
	return string(plain), nil
}

// LoadOrCreateKey reads the key file at path, creating it (mode 0600, with
// a random key) when it does not exist. Several processes may race to
// create it: one wins and the others read its key.
func LoadOrCreateKey(path string) ([]byte, error) {
	if key, err := os.ReadFile(path); err == nil {
		return checkKey(path, key)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read key file %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create key directory: %w", err)
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	// Write a temporary file, then link it into place: a reader never sees
	// a partly written key, and only one creator wins.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".key-*")
	if err != nil {
		return nil, fmt.Errorf("create key file: %w", err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(key); err != nil {
		_ = tmp.Close()
		return nil, fmt.Errorf("write key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("close key file: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("install key file %s: %w", path, err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key file %s: %w", path, err)
	}
	return checkKey(path, got)
}

func checkKey(path string, key []byte) ([]byte, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("key file %s must hold %d bytes, has %d", path, KeySize, len(key))
	}
	return key, nil
}
