package frontend

import (
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/sluice-llm/sluice/api-frontend/respstore"
	"github.com/sluice-llm/sluice/api-frontend/seal"
	"github.com/sluice-llm/sluice/configs"
)

// runtimeDir is where the frontends of a host share state:
// $XDG_RUNTIME_DIR/sluice, else $TMPDIR/sluice-UID.
func runtimeDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "sluice")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("sluice-%d", os.Getuid()))
}

// openResponseStore opens the /v1/responses store and the reasoning key
// the flags name (defaults: responses-PORT.db and responses.key in the
// runtime directory, so every frontend on one port shares them).
// --responses-store off keeps no responses (the key is still loaded).
func openResponseStore(cfg *configs.Frontend, log *zap.Logger) (*respstore.Store, *seal.Sealer, func(), error) {
	path := cfg.ResponsesStore
	if path == "" {
		path = filepath.Join(runtimeDir(), fmt.Sprintf("responses-%d.db", cfg.Port))
	}
	keyPath := cfg.ResponsesKeyFile
	if keyPath == "" {
		dir := runtimeDir()
		if path != "off" {
			dir = filepath.Dir(path)
		}
		keyPath = filepath.Join(dir, "responses.key")
	}
	key, err := seal.LoadOrCreateKey(keyPath)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("load responses key: %w", err)
	}
	sealer, err := seal.New(key)
	if err != nil {
		return nil, nil, nil, err
	}
	if path == "off" {
		return nil, sealer, func() {}, nil
	}
	store, err := respstore.Open(respstore.Options{Path: path, MaxBytes: cfg.ResponsesStoreMaxBytes, TTL: cfg.ResponsesStoreTTL})
	if err != nil {
		return nil, nil, nil, err
	}
	log.Info("response store", zap.String("path", path), zap.String("key", keyPath))
	return store, sealer, func() {
		if err := store.Close(); err != nil {
			log.Warn("close response store", zap.Error(err))
		}
	}, nil
}
