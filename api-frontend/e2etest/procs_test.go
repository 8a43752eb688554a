package e2etest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/api-frontend/frontend"
	"github.com/sluice-llm/sluice/internal/testproc"
)

// TestFrontendProcs checks the GOMAXPROCS a frontend process takes: one
// per engine link (frontend.Procs) by default, the environment's when it
// sets GOMAXPROCS. It reads the frontend's log line, which names the value
// the process runs with.
func TestFrontendProcs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	tests := []struct {
		name    string
		engines int
		env     []string
		want    int
	}{
		{"one engine", 1, nil, 1},
		{"two engines", 2, nil, frontend.Procs(runtime.NumCPU(), 2)},
		{"the environment's", 1, []string{"GOMAXPROCS=3"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env == nil && os.Getenv("GOMAXPROCS") != "" {
				t.Skip("the test's own GOMAXPROCS reaches the frontend")
			}
			var addrs []string
			for i := 0; i < tt.engines; i++ {
				a := engineAddr(t)
				startEngine(t, a)
				addrs = append(addrs, a)
			}
			port := freePort(t)
			fe := testproc.Start(t, filepath.Join(binDir, "api-frontend"), testproc.Options{Env: tt.env},
				"--model", "demo", "--engine", strings.Join(addrs, ","), "--host", "127.0.0.1",
				"--port", fmt.Sprint(port), "--log-format", "json")
			waitHealth(t, fmt.Sprintf("http://127.0.0.1:%d", port), http.StatusOK, 60*time.Second)
			got := -1
			for _, line := range strings.Split(fe.Output(), "\n") {
				if !strings.Contains(line, "GOMAXPROCS") {
					continue
				}
				var l struct {
					Procs int `json:"procs"`
				}
				if err := json.Unmarshal([]byte(line), &l); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				got = l.Procs
			}
			if got != tt.want {
				t.Fatalf("GOMAXPROCS %d, want %d; log:\n%s", got, tt.want, fe.Output())
			}
		})
	}
}
