package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// attack is one hostile request of issue 21 at the size the issue gives.
type attack struct {
	name   string
	path   string
	body   func() string
	status int    // the status the attacker must get
	param  string // the field a 4xx must name ("" : not checked)
}

func jsonList(n int, item func(i int) string) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(item(i))
	}
	sb.WriteByte(']')
	return sb.String()
}

// wideSchemaJSON is an object schema of n string properties named after seed.
func wideSchemaJSON(seed, n int) string {
	var sb strings.Builder
	sb.WriteString(`{"type":"object","properties":{`)
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"p%d_%d":{"type":"string"}`, seed, i)
	}
	sb.WriteString(`}}`)
	return sb.String()
}

// issue21Attacks are the cases of issue 21, each at its reported size.
func issue21Attacks() []attack {
	return []attack{
		{"100k stop strings, n 64, streamed", "/v1/completions", func() string {
			stops := jsonList(100000, func(i int) string { return fmt.Sprintf(`"stop-%06d"`, i) })
			return `{"prompt":"hello","n":64,"max_tokens":500,"stream":true,"stop":` + stops + `}`
		}, 400, "stop"},
		{"10 000-property json_schema", "/v1/completions", func() string {
			return `{"prompt":"x","max_tokens":8,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":` + wideSchemaJSON(1, 10000) + `}}}`
		}, 400, "response_format"},
		{"10 000 prompts × n 128", "/v1/completions", func() string {
			return `{"prompt":` + jsonList(10000, func(int) string { return `"p"` }) + `,"n":128,"max_tokens":1}`
		}, 400, "n"},
		{"160 000 non-canonical logit_bias keys", "/v1/completions", func() string {
			return `{"prompt":"x","max_tokens":2,"logit_bias":{` + strings.TrimSuffix(strings.TrimPrefix(jsonList(160000, func(i int) string { return fmt.Sprintf(`"%07d":1`, i%20000) }), "["), "]") + `}}`
		}, 400, "logit_bias"},
		{"logit_bias key +7", "/v1/completions", func() string { return `{"prompt":"x","max_tokens":2,"logit_bias":{"+7":1}}` }, 400, "logit_bias"},
		{"/tokenize of a 30 MB prompt", "/tokenize", func() string {
			return `{"prompt":"` + strings.Repeat("word ", 6<<20) + `","return_token_strs":true}`
		}, 413, ""},
		{"guided_regex \\p{L}{1000}", "/v1/completions", func() string { return `{"prompt":"x","max_tokens":4,"guided_regex":"\\p{L}{1000}"}` }, 400, "guided_regex"},
		{"json_schema pattern ^\\p{L}{1000}$", "/v1/completions", func() string {
			return `{"prompt":"x","max_tokens":4,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"a":{"type":"string","pattern":"^\\p{L}{1000}$"}},"required":["a"]}}}}`
		}, 400, "response_format"},
		// Within the limits: 64 stop strings that never match, n 64,
		// streamed; it completes, and its per-token stop work does not
		// hold up anyone else.
		{"64 stop strings, n 64, streamed (within limits)", "/v1/completions", func() string {
			stops := jsonList(64, func(i int) string { return fmt.Sprintf(`"\u0001never-%02d"`, i) })
			return `{"prompt":"hello","n":64,"max_tokens":200,"ignore_eos":true,"stream":true,"stop":` + stops + `}`
		}, 200, ""},
		// Structured outputs with the sim (item 8): 200, not 500.
		{"json_schema on the sim", "/v1/completions", func() string {
			return `{"prompt":"x","max_tokens":40,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"]}}}}`
		}, 200, ""},
		{"guided_choice on the sim", "/v1/completions", func() string { return `{"prompt":"x","max_tokens":8,"guided_choice":["yes","no"]}` }, 200, ""},
		{"tool_choice required on the sim", "/v1/chat/completions", func() string {
			return `{"messages":[{"role":"user","content":"x"}],"max_tokens":60,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}}}],"tool_choice":"required"}`
		}, 200, ""},
	}
}

// rssMB returns a process's resident set in MB.
func rssMB(t testing.TB, pid int) int {
	t.Helper()
	kb, err := procStatus(pid, "VmRSS")
	if err != nil {
		t.Fatal(err)
	}
	return kb >> 10
}

// TestNoisyNeighbour runs each attack of issue 21 while 20 normal streams
// run on the same frontend: every normal stream finishes with exact usage,
// a 4-token request sent during each attack completes in under 1 s (at
// stream interval 1), the attacker gets its 4xx (or completes within its
// limits), and engine and frontend RSS grow by less than 200 MB.
func TestNoisyNeighbour(t *testing.T) {
	addr := engineAddr(t)
	eng := startEngine(t, addr, "--sim-step-ms", "4")
	fe := startFrontend(t, addr)
	engRSS0, feRSS0 := rssMB(t, eng.Pid()), rssMB(t, fe.Pid())

	const normals, normalTokens = 20, 1000
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	results := make([]streamResult, normals)
	errs := make([]error, normals)
	for i := 0; i < normals; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			body := fmt.Sprintf(`{"prompt":"normal %d","max_tokens":%d,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, i, normalTokens)
			resp, err := post(ctx, fe.base, "/v1/completions", body)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs[i] = fmt.Errorf("status %d", resp.StatusCode)
				return
			}
			evs, err := newSSE(resp.Body).all()
			if err != nil {
				errs[i] = err
				return
			}
			results[i], errs[i] = summarize(evs)
		}(i)
	}
	time.Sleep(100 * time.Millisecond) // the normal streams are running

	var worst time.Duration
	for _, a := range issue21Attacks() {
		body := a.body()
		done := make(chan struct{})
		var status int
		var respBody []byte
		closed := false // 413 seen as a connection closed mid-body
		go func() {
			defer close(done)
			resp, err := post(ctx, fe.base, a.path, body)
			if err != nil && a.status == http.StatusRequestEntityTooLarge && strings.Contains(err.Error(), "reset by peer") {
				// The server answered 413 and closed the connection
				// while the client was still writing the body.
				status, closed = a.status, true
				return
			}
			if err != nil {
				t.Errorf("%s: %v", a.name, err)
				return
			}
			defer resp.Body.Close()
			status = resp.StatusCode
			respBody, _ = io.ReadAll(resp.Body)
		}()
		// A small request while the attack is in flight.
		time.Sleep(20 * time.Millisecond)
		t0 := time.Now()
		resp, err := post(ctx, fe.base, "/v1/completions", `{"prompt":"tiny","max_tokens":4,"ignore_eos":true}`)
		if err != nil {
			t.Fatalf("%s: small request: %v", a.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(t0)
		worst = max(worst, took)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"completion_tokens":4`) {
			t.Errorf("%s: small request: %d %s", a.name, resp.StatusCode, tail(string(b), 300))
		}
		if took > time.Second {
			t.Errorf("%s: a 4-token request took %s during the attack", a.name, took)
		}
		<-done
		if status != a.status {
			t.Errorf("%s: status %d, want %d: %s", a.name, status, a.status, tail(string(respBody), 300))
			continue
		}
		if status >= 400 && !closed {
			if err := checkErrorJSON(respBody); err != nil {
				t.Errorf("%s: %v", a.name, err)
			}
			var e struct {
				Error struct {
					Message string  `json:"message"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			_ = json.Unmarshal(respBody, &e)
			if len(e.Error.Message) > 300 {
				t.Errorf("%s: %d-byte error message", a.name, len(e.Error.Message))
			}
			if a.param != "" && (e.Error.Param == nil || *e.Error.Param != a.param) {
				t.Errorf("%s: error does not name %s: %s", a.name, a.param, tail(string(respBody), 300))
			}
		} else if strings.Contains(string(respBody), `"error"`) {
			t.Errorf("%s: error in the answer: %s", a.name, tail(string(respBody), 300))
		}
	}
	wg.Wait()
	for i := range results {
		r := results[i]
		if errs[i] != nil || !r.done || r.errMsg != "" || r.usage != normalTokens || r.finish != "length" {
			t.Errorf("normal stream %d: err %v, done %v, error %q, usage %d, finish %q", i, errs[i], r.done, r.errMsg, r.usage, r.finish)
		}
	}
	engRSS, feRSS := rssMB(t, eng.Pid()), rssMB(t, fe.Pid())
	record(t, "small request during attacks, worst", worst)
	record(t, "engine RSS MB before/after", fmt.Sprintf("%d/%d", engRSS0, engRSS))
	record(t, "frontend RSS MB before/after", fmt.Sprintf("%d/%d", feRSS0, feRSS))
	if engRSS-engRSS0 > 200 || feRSS-feRSS0 > 200 {
		t.Errorf("RSS grew by more than 200 MB: engine %d → %d, frontend %d → %d", engRSS0, engRSS, feRSS0, feRSS)
	}
}

// TestStopFloodRaisedLimits is issue 21's first attack with the stop-string
// caps raised out of its way (--max-stop-strings 100000): 100 000 stop
// strings, n 64, max_tokens 500, streamed, while 20 normal streams run on
// the same frontend. The attacker completes, every normal stream finishes
// with exact usage, and a 4-token request sent meanwhile completes in
// under 1 s (it took 12.6 s, and all 20 streams failed with "engine is
// down", when stop matching was linear in the stop strings and pings
// waited behind it).
func TestStopFloodRaisedLimits(t *testing.T) {
	addr := engineAddr(t)
	eng := startEngine(t, addr, "--sim-step-ms", "4")
	fe := startFrontend(t, addr, "--max-stop-strings", "100000", "--max-stop-str-bytes", "4000000")
	engRSS0, feRSS0 := rssMB(t, eng.Pid()), rssMB(t, fe.Pid())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const normals, normalTokens = 20, 600
	type res struct {
		r   streamResult
		err error
	}
	stream := func(body string) res {
		resp, err := post(ctx, fe.base, "/v1/completions", body)
		if err != nil {
			return res{err: err}
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return res{err: fmt.Errorf("status %d: %s", resp.StatusCode, tail(string(b), 200))}
		}
		evs, err := newSSE(resp.Body).all()
		if err != nil {
			return res{err: err}
		}
		r, err := summarize(evs)
		return res{r, err}
	}
	out := make([]res, normals+1)
	var wg sync.WaitGroup
	for i := 0; i < normals; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			out[i] = stream(fmt.Sprintf(`{"prompt":"normal %d","max_tokens":%d,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, i, normalTokens))
		}(i)
	}
	time.Sleep(100 * time.Millisecond)
	stops := jsonList(100000, func(i int) string { return fmt.Sprintf(`"stop-%06d"`, i) })
	wg.Add(1)
	go func() {
		defer wg.Done()
		out[normals] = stream(`{"prompt":"hello","n":64,"max_tokens":500,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true},"stop":` + stops + `}`)
	}()
	var worst time.Duration
	for k := 0; k < 5; k++ {
		time.Sleep(200 * time.Millisecond)
		t0 := time.Now()
		resp, err := post(ctx, fe.base, "/v1/completions", `{"prompt":"tiny","max_tokens":4,"ignore_eos":true}`)
		if err != nil {
			t.Fatalf("small request: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(t0)
		worst = max(worst, took)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"completion_tokens":4`) {
			t.Errorf("small request: %d %s", resp.StatusCode, tail(string(b), 300))
		}
	}
	if worst > time.Second {
		t.Errorf("a 4-token request took %s during the attack", worst)
	}
	wg.Wait()
	for i, o := range out {
		want := normalTokens
		if i == normals {
			want = 64 * 500 // the attacker's usage covers its 64 choices
		}
		if o.err != nil || !o.r.done || o.r.errMsg != "" || o.r.usage != want || o.r.finish != "length" {
			t.Errorf("stream %d: err %v, done %v, error %q, usage %d (want %d), finish %q", i, o.err, o.r.done, o.r.errMsg, o.r.usage, want, o.r.finish)
		}
	}
	engRSS, feRSS := rssMB(t, eng.Pid()), rssMB(t, fe.Pid())
	record(t, "small request during the stop flood, worst", worst)
	record(t, "engine RSS MB before/after", fmt.Sprintf("%d/%d", engRSS0, engRSS))
	record(t, "frontend RSS MB before/after", fmt.Sprintf("%d/%d", feRSS0, feRSS))
	if engRSS-engRSS0 > 200 || feRSS-feRSS0 > 200 {
		t.Errorf("RSS grew by more than 200 MB: engine %d → %d, frontend %d → %d", engRSS0, engRSS, feRSS0, feRSS)
	}
}
