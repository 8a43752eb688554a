// Command asmgen writes package cpu's generated assembly files (see package
// asmgen) into the current directory: `go generate ./kernels/cpu` runs it.
// TestGenerated in package cpu checks that the committed files match.
package main

import (
	"fmt"
	"os"

	"github.com/sluice-llm/sluice/kernels/cpu/internal/asmgen"
)

func main() {
	for name, text := range asmgen.Files() {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "asmgen:", err)
			os.Exit(1)
		}
	}
}
