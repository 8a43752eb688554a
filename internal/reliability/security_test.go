package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// do sends one request with an optional Authorization header value.
func do(t *testing.T, method, url, body, auth string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, url, r)
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestAPIKey: with --api-key every inference route needs the key (401 with
// an error JSON otherwise), /health and /metrics stay open, and the key
// appears in no log line or response.
func TestAPIKey(t *testing.T) {
	key := fmt.Sprintf("sk-rel-%016x%016x", rand.Uint64(), rand.Uint64())
	wrong := fmt.Sprintf("sk-wrong-%016x", rand.Uint64())
	addr := engineAddr(t)
	eng := startEngine(t, addr, "--sim-step-ms", "1")
	feFlag := startFrontend(t, addr, "--api-key", key)
	// The environment variable keeps the key out of /proc/<pid>/cmdline.
	t.Setenv("SLUICE_API_KEY", key)
	feEnv := startFrontend(t, addr)

	routes := []struct{ method, path, body string }{
		{http.MethodGet, "/v1/models", ""},
		{http.MethodPost, "/v1/completions", `{"model":"demo","prompt":"hi","max_tokens":2}`},
		{http.MethodPost, "/v1/completions", `{"model":"demo","prompt":"hi","max_tokens":2,"stream":true}`},
		{http.MethodPost, "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`},
		{http.MethodPost, "/tokenize", `{"model":"demo","prompt":"hi"}`},
		{http.MethodPost, "/detokenize", `{"model":"demo","tokens":[1,2]}`},
	}
	badAuth := []string{"", "Bearer", "Bearer ", "Bearer " + wrong, "Bearer " + key + "x", "Bearer " + key[:len(key)-1], "Basic " + key, key, "bearer" + key, "Bearer  " + wrong}
	checks := 0
	for _, fe := range []*frontend{feFlag, feEnv} {
		for _, r := range routes {
			for _, a := range badAuth {
				code, b := do(t, r.method, fe.base+r.path, r.body, a)
				checks++
				if code != http.StatusUnauthorized {
					t.Errorf("%s %s with Authorization %q: %d, want 401: %s", r.method, r.path, a, code, tail(string(b), 200))
					continue
				}
				if err := checkErrorJSON(b); err != nil {
					t.Errorf("%s %s 401: %v", r.method, r.path, err)
				}
			}
			code, b := do(t, r.method, fe.base+r.path, r.body, "Bearer "+key)
			checks++
			if code != http.StatusOK {
				t.Errorf("%s %s with the key: %d %s", r.method, r.path, code, tail(string(b), 200))
			}
		}
		for _, open := range []string{"/health", "/metrics"} {
			code, b := do(t, http.MethodGet, fe.base+open, "", "")
			checks++
			if code != http.StatusOK {
				t.Errorf("GET %s without a key: %d", open, code)
			}
			if strings.Contains(string(b), key) {
				t.Errorf("GET %s shows the API key", open)
			}
		}
		// An unknown route needs no key to say 404, and does not echo keys.
		code, b := do(t, http.MethodGet, fe.base+"/v1/nope", "", "Bearer "+wrong)
		if code != http.StatusNotFound || strings.Contains(string(b), wrong) {
			t.Errorf("unknown route: %d %s", code, b)
		}
	}
	for _, p := range []*proc{feFlag.proc, feEnv.proc, eng} {
		out := p.Output()
		if strings.Contains(out, key) || strings.Contains(out, wrong) {
			t.Errorf("%s (pid %d) logged an API key: %s", p.Name, p.Pid(), tail(out, 1000))
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", feEnv.Pid())); err != nil || strings.Contains(string(b), key) {
		t.Errorf("SLUICE_API_KEY frontend: key in cmdline (%v)", err)
	}
	t.Logf("%d auth checks", checks)
	record(t, "auth checks", checks)
}

// TestAPIKeySpawnedLogs: in --engine spawn mode the frontend logs the
// engine's command line; the key must not be in it (nor anywhere else).
func TestAPIKeySpawnedLogs(t *testing.T) {
	key := fmt.Sprintf("sk-spawn-%016x", rand.Uint64())
	port := freePort(t)
	fe := &frontend{proc: start(t, "api-frontend", "--model", "demo", "--executor", "sim", "--sim-step-ms", "1", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--api-key", key, "--log-format", "json"),
		base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	waitHealth(t, fe.base, http.StatusOK, 60*time.Second)
	if code, b := do(t, http.MethodPost, fe.base+"/v1/completions", `{"model":"demo","prompt":"hi","max_tokens":2}`, "Bearer "+key); code != http.StatusOK {
		t.Fatalf("with the key: %d %s", code, b)
	}
	if code, _ := do(t, http.MethodPost, fe.base+"/v1/completions", `{"model":"demo","prompt":"hi","max_tokens":2}`, "Bearer nope"); code != http.StatusUnauthorized {
		t.Fatalf("without the key: %d", code)
	}
	out := fe.Output()
	if strings.Contains(out, key) {
		t.Errorf("spawn mode logged the API key: %s", tail(out, 1000))
	}
	// The spawned engine's socket directory is private.
	m := regexp.MustCompile(`ipc://(/[^" ]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no ipc address in the frontend's log: %s", tail(out, 1000))
	}
	checkSocketPerms(t, m[1])
}

func checkSocketPerms(t *testing.T, sock string) {
	t.Helper()
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	if perm := fi.Mode().Perm(); fi.Mode()&os.ModeSocket == 0 || perm != 0o600 {
		t.Errorf("socket %s: mode %v, want a socket with 0600", sock, fi.Mode())
	}
	di, err := os.Stat(filepath.Dir(sock))
	if err != nil {
		t.Fatal(err)
	}
	if perm := di.Mode().Perm(); perm != 0o700 {
		t.Errorf("socket directory %s: mode %v, want 0700", filepath.Dir(sock), di.Mode().Perm())
	}
}

// TestSocketPermissions: the engine creates its socket directory 0700 and
// the socket 0600, and replaces a stale socket file.
func TestSocketPermissions(t *testing.T) {
	addr := engineAddr(t)
	eng := startEngine(t, addr, "--sim-step-ms", "1")
	checkSocketPerms(t, sockPath(addr))
	// A stale file (the engine was SIGKILLed) is replaced by the next one.
	eng.Kill()
	if _, err := os.Stat(sockPath(addr)); err != nil {
		t.Logf("socket file gone after SIGKILL (%v)", err)
	}
	startEngine(t, addr, "--sim-step-ms", "1")
	checkSocketPerms(t, sockPath(addr))
	fe := startFrontend(t, addr)
	checkServes(t, fe.base)
}

// TestModelNeverAPath: the request's model field is a name, never a path.
func TestModelNeverAPath(t *testing.T) {
	addr := engineAddr(t)
	startEngine(t, addr, "--sim-step-ms", "1")
	fe := startFrontend(t, addr)
	for _, m := range []string{"/etc/passwd", "../../../../etc/shadow", "demo/../../etc/passwd", "file:///etc/passwd", "/proc/self/environ", "demo\x00/etc/passwd"} {
		for _, path := range []string{"/v1/completions", "/v1/chat/completions", "/tokenize"} {
			mj, _ := json.Marshal(m)
			body := fmt.Sprintf(`{"model":%s,"prompt":"hi","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, mj)
			code, b := do(t, http.MethodPost, fe.base+path, body, "")
			if code != http.StatusNotFound || checkErrorJSON(b) != nil || strings.Contains(string(b), "root:") {
				t.Errorf("%s model %q: %d %s, want 404 model not found", path, m, code, tail(string(b), 200))
			}
		}
	}
}
