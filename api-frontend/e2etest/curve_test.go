package e2etest

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-llm/sluice/ipc/zmqtransport"
)

// TestCurveTCP runs an engine on tcp:// with CURVE encryption and an allow
// list: a frontend with an allowed key streams; one with an unknown key never
// becomes healthy.
func TestCurveTCP(t *testing.T) {
	srvPub, srvSec, err := zmqtransport.NewKeyPair()
	if err != nil {
		t.Skipf("SKIP: libzmq without CURVE: %v", err)
	}
	cliPub, cliSec, _ := zmqtransport.NewKeyPair()
	_, otherSec, _ := zmqtransport.NewKeyPair()
	dir := t.TempDir()
	write := func(name, key string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	addr := fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
	startEngine(t, addr, "--curve-secret-key-file", write("engine.key", srvSec), "--curve-allowed-clients-file", write("clients", cliPub))
	base, _ := startFrontend(t, addr, "--engine-curve-public-key-file", write("engine.pub", srvPub), "--curve-secret-key-file", write("fe.key", cliSec))
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"model":"demo","prompt":[1,2,3],"max_tokens":5,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := sse(t, bufio.NewReader(resp.Body))
	if len(events) < 2 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream over CURVE: %v", events)
	}

	port := freePort(t)
	p := start(t, "api-frontend", "--model", "demo", "--engine", addr, "--host", "127.0.0.1", "--port", fmt.Sprint(port),
		"--engine-curve-public-key-file", write("engine2.pub", srvPub), "--curve-secret-key-file", write("other.key", otherSec),
		"--engine-startup-timeout", "2s")
	<-p.Exited() // an unauthorised frontend never gets READY and gives up
	if code := p.Cmd.ProcessState.ExitCode(); code == 0 || !strings.Contains(p.Output(), "engine") {
		t.Fatalf("unauthorised frontend exited %d: %s", code, tail(p.Output(), 2000))
	}
}
