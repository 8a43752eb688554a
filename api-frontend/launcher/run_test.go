package launcher

import (
	"context"
	"strings"
	"testing"
)

func TestRunRejectsBadOptions(t *testing.T) {
	args := func(FrontendSpec) []string { return nil }
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"no executable", Options{FrontendArgs: args, Count: 2, EngineAddr: "ipc:///x"}, "no frontend executable"},
		{"no args builder", Options{Executable: "/bin/true", Count: 2, EngineAddr: "ipc:///x"}, "no FrontendArgs"},
		{"zero count", Options{Executable: "/bin/true", FrontendArgs: args, EngineAddr: "ipc:///x"}, "must be >= 1"},
		{"no engine", Options{Executable: "/bin/true", FrontendArgs: args, Count: 2}, "neither an engine"},
		{"bad port", Options{Executable: "/bin/true", FrontendArgs: args, Count: 2, EngineAddr: "ipc:///x", Port: 70000}, "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Run(context.Background(), tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{Executable: "x", FrontendArgs: func(FrontendSpec) []string { return nil }, Count: 1, EngineAddr: "a"}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.ShutdownTimeout != DefaultShutdownTimeout || o.EngineStartupTimeout != DefaultEngineStartupTimeout ||
		o.RestartBackoff != DefaultRestartBackoff || o.MaxRestartBackoff != DefaultMaxRestartBackoff ||
		o.MinUptime != DefaultMinUptime || o.MaxQuickFailures != DefaultMaxQuickFailures ||
		o.Stdout == nil || o.Stderr == nil || o.Log == nil {
		t.Fatalf("defaults not applied: %+v", o)
	}
}
