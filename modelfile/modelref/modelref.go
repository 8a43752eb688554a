// Package modelref resolves a model reference, as --model takes it, to a
// local path: the one place both programs do it (the frontend resolves
// first when it spawns the engine, so the engine finds the files cached).
package modelref

import (
	"context"
	"fmt"

	"github.com/sluice-llm/sluice/modelfile/demo"
	"github.com/sluice-llm/sluice/modelfile/hub"
)

// Resolve maps ref to a local path. "demo" (or demo-15m, demo-110m) is the
// project's generated demo model, written into its cache on first use; a
// Hugging Face Hub id ("org/name", not an existing path) is downloaded into
// the Hugging Face cache (HF_HOME, HF_TOKEN, HF_HUB_OFFLINE apply); anything
// else is a path and comes back as it is.
func Resolve(ctx context.Context, ref string) (string, error) {
	if hub.IsRepoID(ref) {
		dir, err := hub.Download(ctx, ref, hub.OptionsFromEnv())
		if err != nil {
			return "", fmt.Errorf("download %s: %w", ref, err)
		}
		return dir, nil
	}
	dir, ok, err := demo.Resolve(ref)
	if err != nil {
		return "", fmt.Errorf("prepare demo model %s: %w", ref, err)
	}
	if ok {
		return dir, nil
	}
	return ref, nil
}
