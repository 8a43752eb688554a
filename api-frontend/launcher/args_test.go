package launcher

import (
	"slices"
	"strings"
	"testing"
)

func TestStripFlags(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		strip []string
		want  []string
	}{
		{"none", []string{"--model", "demo"}, []string{"port"}, []string{"--model", "demo"}},
		{"space form", []string{"--model", "demo", "--api-server-count", "4", "--port", "9"}, []string{"api-server-count"},
			[]string{"--model", "demo", "--port", "9"}},
		{"equals form", []string{"--api-server-count=4", "--model=demo"}, []string{"api-server-count"}, []string{"--model=demo"}},
		{"single dash", []string{"-api-server-count", "4", "-engine=spawn", "-x"}, []string{"api-server-count", "engine"}, []string{"-x"}},
		{"several", []string{"--engine", "spawn", "--host", "0.0.0.0", "--stream-interval", "2", "--port", "8000"},
			launcherFlags, []string{"--stream-interval", "2"}},
		{"missing value at end", []string{"--model", "demo", "--port"}, []string{"port"}, []string{"--model", "demo"}},
		{"after double dash kept", []string{"--port", "1", "--", "--port", "2"}, []string{"port"}, []string{"--", "--port", "2"}},
		{"triple dash is not a flag", []string{"---port", "1"}, []string{"port"}, []string{"---port", "1"}},
		{"lone dash kept", []string{"-", "--port", "1"}, []string{"port"}, []string{"-"}},
		{"prefix is not a match", []string{"--portal", "x"}, []string{"port"}, []string{"--portal", "x"}},
		{"empty", nil, []string{"port"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.args)
			got := StripFlags(tt.args, tt.strip...)
			if !slices.Equal(got, tt.want) {
				t.Errorf("StripFlags(%q, %q) = %q, want %q", tt.args, tt.strip, got, tt.want)
			}
			if !slices.Equal(in, tt.args) {
				t.Errorf("StripFlags modified its input: %q", tt.args)
			}
		})
	}
}

func TestFrontendArgs(t *testing.T) {
	base := []string{"--model", "demo", "--api-server-count", "2", "--port=8000", "--engine", "spawn", "--stream-interval", "4"}
	spec := FrontendSpec{Index: 2, EngineAddr: "ipc:///tmp/x/engine.sock", Host: "127.0.0.1", Port: 8123}
	want := []string{"--model", "demo", "--stream-interval", "4",
		"--engine", "ipc:///tmp/x/engine.sock", "--host", "127.0.0.1", "--port", "8123", "--frontend-id", "fe-2"}
	if got := FrontendArgs(base, spec, "fe"); !slices.Equal(got, want) {
		t.Errorf("first start: got %q, want %q", got, want)
	}
	spec.Restart = 3
	got := FrontendArgs(base, spec, "fe")
	if id := got[len(got)-1]; id != "fe-2.r3" {
		t.Errorf("restarted frontend id = %q, want fe-2.r3", id)
	}
}

// FuzzStripFlags checks that no argument list panics and that a stripped
// flag never survives outside a "--" tail.
func FuzzStripFlags(f *testing.F) {
	f.Add("--model demo --port 8000 --api-server-count=2")
	f.Add("-port -- --port")
	f.Add("--port")
	f.Add("--=x -= --port= ---port")
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		got := StripFlags(args, "port", "api-server-count")
		if len(got) > len(args) {
			t.Fatalf("output longer than input: %q → %q", args, got)
		}
		for _, a := range got {
			if a == "--" {
				break
			}
			if name, _, ok := flagName(a); ok && (name == "port" || name == "api-server-count") {
				t.Fatalf("stripped flag %q kept in %q (from %q)", a, got, args)
			}
		}
	})
}

func TestHasFlag(t *testing.T) {
	type inner struct {
		B int `flag:"b"`
	}
	type cfg struct {
		A int `flag:"a"`
		inner
		C int
	}
	for name, want := range map[string]bool{"a": true, "b": true, "c": false, "": false} {
		if got := hasFlag(&cfg{}, name); got != want {
			t.Errorf("hasFlag(%q) = %v, want %v", name, got, want)
		}
	}
	if hasFlag(42, "a") {
		t.Error("hasFlag of a non-struct is true")
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want []string }{
		{[]string{"--model", "m", "--api-key", "s3cret", "--port", "1"}, []string{"--model", "m", "--api-key", "***", "--port", "1"}},
		{[]string{"-api-key=s3cret"}, []string{"-api-key=***"}},
		{[]string{"--api-key"}, []string{"--api-key"}},
		{[]string{"--", "--api-key", "x"}, []string{"--", "--api-key", "x"}},
	}
	for _, tt := range tests {
		in := slices.Clone(tt.in)
		if got := redact(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if !slices.Equal(in, tt.in) {
			t.Errorf("redact modified its input")
		}
	}
}
