package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/sluice-llm/sluice/internal/testproc"
	"github.com/sluice-llm/sluice/ipc"
	"github.com/sluice-llm/sluice/ipc/zmqtransport"
)

// binDir holds engine-core and api-frontend, built once by TestMain.
var binDir string

// long reports whether the long suite (soak, full-size storms) runs.
func long() bool { return os.Getenv("SLUICE_RELIABILITY_LONG") == "1" && !testing.Short() }

func TestMain(m *testing.M) {
	flag.Parse()
	if dir := os.Getenv("SLUICE_RELIABILITY_BIN"); dir != "" {
		// Prebuilt binaries (a tree being edited may not build right now).
		binDir = dir
		os.Exit(m.Run())
	}
	dir, err := testproc.Build("sluice-rel-bin-", "./engine-core", "./api-frontend")
	if err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a started child process; its stdout and stderr are kept.
type proc = testproc.Proc

// start runs bin/name with args; the process is SIGKILLed at cleanup (and
// when the test binary dies, through Pdeathsig).
func start(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	return testproc.Start(t, filepath.Join(binDir, name), testproc.Options{Env: []string{"GOMAXPROCS=2"}, TailOnFail: 3000}, args...)
}

func tail(s string, n int) string { return testproc.Tail(s, n) }

// sockDir returns a fresh private directory for ipc:// sockets (short
// paths: a unix socket path must fit in 107 bytes).
func sockDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "slrel")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// engineAddr returns a fresh ipc:// address; the engine creates the
// socket's directory (a subdirectory that does not exist yet).
func engineAddr(t testing.TB) string {
	return "ipc://" + filepath.Join(sockDir(t), "run", "engine.sock")
}

func sockPath(addr string) string { return strings.TrimPrefix(addr, "ipc://") }

// engineOpts are the flags every test engine gets.
func engineArgs(addr string, extra ...string) []string {
	return append([]string{"--model", "demo", "--executor", "sim", "--listen", addr, "--log-format", "console"}, extra...)
}

// startEngine starts a sim engine on addr and waits for its socket file.
func startEngine(t testing.TB, addr string, extra ...string) *proc {
	t.Helper()
	p := start(t, "engine-core", engineArgs(addr, extra...)...)
	waitFor(t, 30*time.Second, "engine socket "+addr, func() (bool, string) {
		if !p.Alive() {
			t.Fatalf("engine-core exited: %s", tail(p.Output(), 2000))
		}
		_, err := os.Stat(sockPath(addr))
		return err == nil, fmt.Sprint(err)
	})
	return p
}

func freePort(t testing.TB) int { return testproc.FreePort(t) }

// frontend is a started api-frontend.
type frontend struct {
	*proc
	base string
}

// startFrontend starts api-frontend against engine addr and waits until
// /health answers 200.
func startFrontend(t testing.TB, addr string, extra ...string) *frontend {
	t.Helper()
	port := freePort(t)
	args := append([]string{"--model", "demo", "--engine", addr, "--host", "127.0.0.1", "--port", strconv.Itoa(port)}, extra...)
	f := &frontend{proc: start(t, "api-frontend", args...), base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	waitFor(t, 60*time.Second, "frontend /health 200", func() (bool, string) {
		if !f.Alive() {
			t.Fatalf("api-frontend exited: %s", tail(f.Output(), 2000))
		}
		code, err := healthCode(f.base)
		return code == http.StatusOK, fmt.Sprintf("status %d err %v", code, err)
	})
	return f
}

// client is the HTTP client of the tests: no proxy, loopback only.
var client = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

func healthCode(base string) (int, error) { return testproc.HealthCode(base) }

// waitFor polls cond every 20 ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	testproc.WaitFor(t, timeout, what, cond)
}

// waitHealth waits until /health answers want.
func waitHealth(t testing.TB, base string, want int, timeout time.Duration) time.Duration {
	t.Helper()
	return testproc.WaitHealth(t, base, want, timeout)
}

// post sends a JSON body with optional headers (pairs) and returns the
// response; the caller closes it.
func post(ctx context.Context, base, path, body string, headers ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post %s: %w", path, err)
	}
	return resp, nil
}

// sseReader reads the data payloads of an SSE body one at a time.
type sseReader struct {
	r     *bufio.Reader
	delay func() // called before each event is read (slow clients)
}

func newSSE(r io.Reader) *sseReader { return &sseReader{r: bufio.NewReaderSize(r, 4096)} }

// next returns the next data payload, or an error (io.EOF at the end).
func (s *sseReader) next() (string, error) {
	if s.delay != nil {
		s.delay()
	}
	for {
		line, err := s.r.ReadString('\n')
		if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok && strings.HasSuffix(line, "\n") {
			return d, nil
		}
		if err != nil {
			return "", err
		}
	}
}

// all reads every remaining payload.
func (s *sseReader) all() ([]string, error) {
	var out []string
	for {
		d, err := s.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
}

// chunk is the part of a streamed completion/chat chunk the tests read.
type chunk struct {
	Choices []struct {
		Index int    `json:"index"`
		Text  string `json:"text"`
		Delta struct {
			Content *string `json:"content"`
		} `json:"delta"`
		Logprobs *struct {
			Tokens []string `json:"tokens"`
		} `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    any    `json:"code"`
	} `json:"error"`
}

// streamResult summarizes one SSE stream.
type streamResult struct {
	text       string
	tokens     int // logprobs entries seen (when logprobs were asked for)
	chunks     int
	finish     string
	usage      int // completion_tokens of the usage chunk, -1 when absent
	errMsg     string
	errAt      int // index of the error event, -1 when none
	done       bool
	afterDone  int // events after [DONE] (must be 0)
	afterError int // non-[DONE] events after the error event (must be 0)
}

// summarize parses a stream's payloads.
func summarize(evs []string) (streamResult, error) {
	r := streamResult{usage: -1, errAt: -1}
	for i, e := range evs {
		if r.done {
			r.afterDone++
			continue
		}
		if e == "[DONE]" {
			r.done = true
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			return r, fmt.Errorf("event %d %q: %w", i, e, err)
		}
		if r.errAt >= 0 {
			r.afterError++
		}
		if c.Error != nil {
			r.errMsg, r.errAt = c.Error.Message, i
			continue
		}
		if c.Usage != nil && len(c.Choices) == 0 {
			r.usage = c.Usage.CompletionTokens
			continue
		}
		for _, ch := range c.Choices {
			r.chunks++
			r.text += ch.Text
			if ch.Delta.Content != nil {
				r.text += *ch.Delta.Content
			}
			if ch.Logprobs != nil {
				r.tokens += len(ch.Logprobs.Tokens)
			}
			if ch.FinishReason != nil {
				r.finish = *ch.FinishReason
			}
		}
	}
	return r, nil
}

// metrics scrapes base/metrics into "name{labels}" → value.
func metrics(base string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape: status %d", resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	return out, nil
}

// metric sums every series of a metric family name in m.
func metric(m map[string]float64, name string) (float64, bool) {
	sum, found := 0.0, false
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			sum += v
			found = true
		}
	}
	return sum, found
}

// observer is a side connection to the engine (a frontend that sends no
// requests) used to read the scheduler's stats through the "stats" utility.
type observer struct {
	conn *zmqtransport.EngineConn
}

func newObserver(t testing.TB, addr string) *observer {
	t.Helper()
	conn, err := zmqtransport.Dial(zmqtransport.ClientConfig{Addr: addr, FrontendID: fmt.Sprintf("rel-observer-%d", rand.Uint64())})
	if err != nil {
		t.Fatalf("observer: %v", err)
	}
	t.Cleanup(conn.Close)
	o := &observer{conn: conn}
	o.waitReady(t, 30*time.Second)
	return o
}

func (o *observer) waitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "observer READY", func() (bool, string) {
		_, ok := o.conn.Ready()
		return ok, "not ready"
	})
}

// stats asks the engine for its scheduler stats.
func (o *observer) stats() (ipc.SchedulerStats, error) {
	var st ipc.SchedulerStats
	r, err := o.conn.Call("stats", nil, 2*time.Second)
	if err != nil {
		return st, fmt.Errorf("stats call: %w", err)
	}
	if r.Error != "" {
		return st, fmt.Errorf("stats: %s", r.Error)
	}
	if err := msgpack.Unmarshal(r.Result, &st); err != nil {
		return st, fmt.Errorf("decode stats: %w", err)
	}
	return st, nil
}

// waitIdle waits until the engine runs nothing and uses no KV block.
func (o *observer) waitIdle(t testing.TB, timeout time.Duration) (time.Duration, ipc.SchedulerStats) {
	t.Helper()
	t0 := time.Now()
	var last ipc.SchedulerStats
	waitFor(t, timeout, "engine idle (0 running, 0 waiting, 0 KV)", func() (bool, string) {
		st, err := o.stats()
		if err != nil {
			return false, err.Error()
		}
		last = st
		return st.Running == 0 && st.Waiting == 0 && st.KVUsage == 0, fmt.Sprintf("%+v", st)
	})
	return time.Since(t0), last
}

// procStatus reads fields of /proc/pid/status (VmRSS in kB, Threads).
func procStatus(pid int, field string) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read status: %w", err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(field) + `:\s+(\d+)`).FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
	}
	return strconv.Atoi(string(m[1]))
}

// openFDs counts the entries of /proc/pid/fd.
func openFDs(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("read fds: %w", err)
	}
	return len(ents), nil
}

// percentile returns the p-quantile (0..1) of xs.
func percentile(xs []time.Duration, p float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), xs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p * float64(len(s)-1))
	return s[i]
}

// openStream posts a streaming request and checks for 200.
func openStream(t testing.TB, ctx context.Context, base, path, body string, headers ...string) (*http.Response, *sseReader) {
	t.Helper()
	resp, err := post(ctx, base, path, body, headers...)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("POST %s: status %d: %s", path, resp.StatusCode, b)
	}
	return resp, newSSE(resp.Body)
}

// record logs a measured figure; with SLUICE_RELIABILITY_FIGURES=FILE it
// is also appended to FILE (docs/RELIABILITY.md's figures come from there).
func record(t testing.TB, what string, v any) {
	t.Helper()
	line := fmt.Sprintf("%s\t%s\t%v", t.Name(), what, v)
	t.Log("FIGURE " + line)
	if path := os.Getenv("SLUICE_RELIABILITY_FIGURES"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Errorf("figures file: %v", err)
			return
		}
		defer f.Close()
		_, _ = fmt.Fprintln(f, line)
	}
}
