package chattemplate

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-llm/sluice/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the Python jinja2 reference")

// renderCase is one entry of testdata/cases.json (the same JSON is sent to
// testdata/render_hf.py).
type renderCase struct {
	Name                 string            `json:"name"`
	Messages             []json.RawMessage `json:"messages"`
	Tools                []json.RawMessage `json:"tools,omitempty"`
	AddGenerationPrompt  bool              `json:"add_generation_prompt"`
	ContinueFinalMessage bool              `json:"continue_final_message"`
	Kwargs               map[string]any    `json:"kwargs,omitempty"`
	BOSToken             string            `json:"bos_token"`
	EOSToken             string            `json:"eos_token"`
	Now                  string            `json:"now"`
}

const defaultNow = "2026-01-02T03:04:05"

// result is a rendering outcome: output, or an error message.
type result struct {
	Output *string `json:"output"`
	Error  *string `json:"error"`
}

type namedTemplate struct {
	name     string
	source   string
	bos, eos string
}

func loadCases(t *testing.T) []renderCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []renderCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// goldenTemplates returns the test template from testdata and, where the
// shared fixtures exist, the real Llama-3 and Qwen3 templates.
func goldenTemplates(t *testing.T) []namedTemplate {
	t.Helper()
	var out []namedTemplate
	for _, name := range []string{"features", "patterns"} {
		src, err := os.ReadFile(filepath.Join("testdata", name+".jinja"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, namedTemplate{name: name, source: string(src), bos: "<s>", eos: "</s>"})
	}
	for _, m := range []string{"llama3", "qwen3"} {
		t.Run("load_"+m, func(t *testing.T) {
			path := testenv.SharedFile(t, filepath.Join("tokenizers", m, "tokenizer_config.json"))
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := ParseTokenizerConfig(data)
			if err != nil {
				t.Fatal(err)
			}
			src, err := Pick(cfg.Templates, "", false)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, namedTemplate{name: m, source: src, bos: cfg.BOSToken, eos: cfg.EOSToken})
		})
	}
	return out
}

// resolve fills a case's defaults (special tokens from the template's
// config, the fixed clock).
func (c renderCase) resolve(nt namedTemplate) renderCase {
	if c.BOSToken == "" {
		c.BOSToken = nt.bos
	}
	if c.EOSToken == "" {
		c.EOSToken = nt.eos
	}
	if c.Now == "" {
		c.Now = defaultNow
	}
	return c
}

func renderGo(t *testing.T, tpl *Template, c renderCase) result {
	t.Helper()
	now, err := time.Parse("2006-01-02T15:04:05", c.Now)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tpl.Render(Input{
		Messages:             c.Messages,
		Tools:                c.Tools,
		AddGenerationPrompt:  c.AddGenerationPrompt,
		ContinueFinalMessage: c.ContinueFinalMessage,
		Kwargs:               c.Kwargs,
		BOSToken:             c.BOSToken,
		EOSToken:             c.EOSToken,
		Now:                  now,
	})
	if err != nil {
		var te *Error
		if !errors.As(err, &te) {
			t.Errorf("error is not a *Error: %v", err)
		}
		msg := err.Error()
		if te != nil && te.Raised {
			msg = te.Message
		}
		return result{Error: &msg}
	}
	return result{Output: &out}
}

// pythonReference renders cases with testdata/render_hf.py, or returns a
// reason why it cannot run.
func pythonReference(t *testing.T, source string, cases []renderCase) (map[string]result, string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil, "python3 not found in PATH"
	}
	if out, err := exec.Command(py, "-c", "import jinja2").CombinedOutput(); err != nil {
		return nil, "python3 cannot import jinja2 (install python3-jinja2): " + strings.TrimSpace(string(out))
	}
	req, err := json.Marshal(map[string]any{"template": source, "cases": cases})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join("testdata", "render_hf.py"))
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("render_hf.py: %v\n%s", err, stderr.String())
	}
	var res map[string]result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("render_hf.py output: %v", err)
	}
	return res, ""
}

func goldenPath(tmpl, name string) string {
	return filepath.Join("testdata", "golden", tmpl, name+".txt")
}

// goldenEncode stores a result: the output, or "ERROR: " and the message.
func goldenEncode(r result) string {
	if r.Error != nil {
		return "ERROR: " + *r.Error + "\n"
	}
	return *r.Output
}

// sameResult compares outputs exactly; errors match when both are errors
// and, for raise_exception, carry the same message.
func sameResult(got, want result) bool {
	switch {
	case got.Output != nil && want.Output != nil:
		return *got.Output == *want.Output
	case got.Error != nil && want.Error != nil:
		return true
	}
	return false
}

func describe(r result) string {
	if r.Error != nil {
		return "error: " + *r.Error
	}
	return "output:\n" + *r.Output
}

// TestGoldenAgainstPython renders each template and case with Go and with
// Python's jinja2 the way Hugging Face does, and requires identical output;
// with -update it rewrites the golden files from Python.
func TestGoldenAgainstPython(t *testing.T) {
	cases := loadCases(t)
	for _, nt := range goldenTemplates(t) {
		t.Run(nt.name, func(t *testing.T) {
			resolved := make([]renderCase, len(cases))
			for i, c := range cases {
				resolved[i] = c.resolve(nt)
			}
			py, why := pythonReference(t, nt.source, resolved)
			if py == nil {
				t.Skipf("SKIP: no Python reference (%s); TestGoldenFiles still checks the committed golden files", why)
			}
			tpl, err := New(nt.source)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			for _, c := range resolved {
				t.Run(c.Name, func(t *testing.T) {
					want, ok := py[c.Name]
					if !ok {
						t.Fatalf("no Python result")
					}
					got := renderGo(t, tpl, c)
					if !sameResult(got, want) {
						t.Errorf("Go %s\n---\nPython %s", describe(got), describe(want))
					}
					if want.Error != nil && got.Error != nil && strings.Contains(*want.Error, "alternate") && *got.Error != *want.Error {
						t.Errorf("raise_exception message: Go %q, Python %q", *got.Error, *want.Error)
					}
					if *update {
						p := goldenPath(nt.name, c.Name)
						if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
							t.Fatal(err)
						}
						if err := os.WriteFile(p, []byte(goldenEncode(want)), 0o644); err != nil {
							t.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// TestGoldenFiles compares Go rendering with the committed Python outputs,
// so the check still runs where python3 or jinja2 is missing.
func TestGoldenFiles(t *testing.T) {
	cases := loadCases(t)
	for _, nt := range goldenTemplates(t) {
		t.Run(nt.name, func(t *testing.T) {
			tpl, err := New(nt.source)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			for _, c := range cases {
				c := c.resolve(nt)
				t.Run(c.Name, func(t *testing.T) {
					data, err := os.ReadFile(goldenPath(nt.name, c.Name))
					if err != nil {
						t.Fatalf("golden file missing (run go test -run TestGoldenAgainstPython -update with python3-jinja2): %v", err)
					}
					got := goldenEncode(renderGo(t, tpl, c))
					want := string(data)
					if strings.HasPrefix(want, "ERROR: ") {
						if !strings.HasPrefix(got, "ERROR: ") {
							t.Errorf("want an error (%s), got output:\n%s", strings.TrimSpace(want), got)
						}
						return
					}
					if got != want {
						t.Errorf("got:\n%s\n---\nwant:\n%s", got, want)
					}
				})
			}
		})
	}
}

// TestExtraTemplatesAgainstPython compares Go and Python on every *.jinja
// in $SLUICE_EXTRA_CHAT_TEMPLATES (a directory of real chat templates kept
// outside the repository) with the cases of testdata/cases.json.
func TestExtraTemplatesAgainstPython(t *testing.T) {
	dir := os.Getenv("SLUICE_EXTRA_CHAT_TEMPLATES")
	if dir == "" {
		t.Skip("SKIP: set SLUICE_EXTRA_CHAT_TEMPLATES to a directory of *.jinja chat templates to compare with Python")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.jinja"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no *.jinja in %s: %v", dir, err)
	}
	cases := loadCases(t)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		nt := namedTemplate{name: filepath.Base(f), source: string(src), bos: "<s>", eos: "</s>"}
		t.Run(nt.name, func(t *testing.T) {
			resolved := make([]renderCase, len(cases))
			for i, c := range cases {
				resolved[i] = c.resolve(nt)
			}
			py, why := pythonReference(t, nt.source, resolved)
			if py == nil {
				t.Skipf("SKIP: no Python reference (%s)", why)
			}
			tpl, err := New(nt.source)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			for _, c := range resolved {
				t.Run(c.Name, func(t *testing.T) {
					if got, want := renderGo(t, tpl, c), py[c.Name]; !sameResult(got, want) {
						t.Errorf("Go %s\n---\nPython %s", describe(got), describe(want))
					}
				})
			}
		})
	}
}

// BenchmarkRender measures one Render of the real Qwen3 template for the
// "tools" case (two tools, a tool call and a tool result).
func BenchmarkRender(b *testing.B) {
	data, err := os.ReadFile(testenv.SharedFile(b, filepath.Join("tokenizers", "qwen3", "tokenizer_config.json")))
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := ParseTokenizerConfig(data)
	if err != nil {
		b.Fatal(err)
	}
	tpl, err := New(cfg.Templates[DefaultName])
	if err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "cases.json"))
	if err != nil {
		b.Fatal(err)
	}
	var cases []renderCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		b.Fatal(err)
	}
	var c renderCase
	for _, x := range cases {
		if x.Name == "tools" {
			c = x
		}
	}
	in := Input{Messages: c.Messages, Tools: c.Tools, AddGenerationPrompt: true, EOSToken: cfg.EOSToken}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tpl.Render(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderPlain measures one Render of a system and a user message
// with plain string content (the common chat request) through ChatML (the
// demo model's template) and the real Qwen3 and Llama 3 templates (skipped
// without ../shared/models).
func BenchmarkRenderPlain(b *testing.B) {
	msgs := []json.RawMessage{
		json.RawMessage(`{"role":"system","content":"You are a helpful assistant."}`),
		json.RawMessage(`{"role":"user","content":"Once upon a time there was a little girl who lived in a village near the forest. Tell me what happened next."}`),
	}
	for _, name := range []string{"chatml", "qwen3", "llama3"} {
		b.Run(name, func(b *testing.B) {
			source := chatMLSource
			if name != "chatml" {
				data, err := os.ReadFile(testenv.SharedFile(b, filepath.Join("tokenizers", name, "tokenizer_config.json")))
				if err != nil {
					b.Fatal(err)
				}
				cfg, err := ParseTokenizerConfig(data)
				if err != nil {
					b.Fatal(err)
				}
				source = cfg.Templates[DefaultName]
			}
			tpl, err := New(source)
			if err != nil {
				b.Fatal(err)
			}
			in := Input{Messages: msgs, AddGenerationPrompt: true, BOSToken: "<s>", EOSToken: "</s>"}
			b.ReportAllocs()
			// CPU time of the process (GC included), far less noisy than
			// wall time on a shared machine.
			var r0, r1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
			for b.Loop() {
				if _, err := tpl.Render(in); err != nil {
					b.Fatal(err)
				}
			}
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
			cpu := r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano()
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// chatMLSource is the demo model's template (modelfile/demo).
const chatMLSource = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
