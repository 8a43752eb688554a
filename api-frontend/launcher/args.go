package launcher

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/sluice-llm/sluice/configs"
)

// StripFlags returns args without the flags named in names, in any of the
// forms Go's flag package accepts: -name value, --name value, -name=value and
// --name=value. Every named flag must take a value (bool flags given as
// -name alone are not supported). Arguments after a bare "--" are kept as
// they are. args itself is not modified.
func StripFlags(args []string, names ...string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, hasValue, ok := flagName(a)
		if !ok || !contains(names, name) {
			out = append(out, a)
			continue
		}
		if !hasValue {
			i++ // skip the value too
		}
	}
	return out
}

// flagName splits a command-line argument into its flag name and whether it
// carries its value after '='. ok is false for arguments that are not flags.
func flagName(a string) (name string, hasValue, ok bool) {
	if len(a) < 2 || a[0] != '-' {
		return "", false, false
	}
	name = a[1:]
	if name[0] == '-' {
		name = name[1:]
	}
	if name == "" || name[0] == '-' || name[0] == '=' {
		return "", false, false
	}
	if k, _, found := strings.Cut(name, "="); found {
		return k, true, true
	}
	return name, false, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// launcherFlags are the api-frontend flags the launcher sets itself on each
// frontend child.
var launcherFlags = []string{"api-server-count", "engine", "frontend-id", "host", "port"}

// FrontendArgs returns the arguments of a frontend child: base (the
// launcher's own arguments) without --api-server-count, --engine,
// --frontend-id, --host and --port, followed by those set for this child.
func FrontendArgs(base []string, spec FrontendSpec, idPrefix string) []string {
	args := StripFlags(base, launcherFlags...)
	id := fmt.Sprintf("%s-%d", idPrefix, spec.Index)
	if spec.Restart > 0 {
		// A fresh identity per incarnation: the engine forgets the dead
		// one by liveness and never confuses the two.
		id += ".r" + strconv.Itoa(spec.Restart)
	}
	return append(args,
		"--engine", spec.EngineAddr,
		"--host", spec.Host,
		"--port", strconv.Itoa(spec.Port),
		"--frontend-id", id)
}

// FromFrontend builds the Options that api-frontend uses for
// --api-server-count count: args are its command-line arguments (children
// get them again, minus the flags the launcher sets), cfg its parsed
// configuration. With --engine spawn, engine-core is taken from the
// directory of the running executable and started with --model and the
// pass-through engine flags; otherwise the children connect to cfg.Engine.
func FromFrontend(cfg *configs.Frontend, args []string, count int, log *zap.Logger) (Options, error) {
	self, err := os.Executable()
	if err != nil {
		return Options{}, fmt.Errorf("find own executable: %w", err)
	}
	prefix := cfg.FrontendID
	if prefix == "" {
		host, _ := os.Hostname()
		prefix = fmt.Sprintf("fe-%s-%d", host, os.Getpid())
	}
	pin := hasFlag(cfg, "api-server-count")
	o := Options{
		Executable: self,
		FrontendArgs: func(spec FrontendSpec) []string {
			a := FrontendArgs(args, spec, prefix)
			if pin {
				// A child must not become a launcher again through
				// SLUICE_API_SERVER_COUNT or a --config file.
				a = append(a, "--api-server-count", "1")
			}
			return a
		},
		Count:                count,
		Host:                 cfg.Host,
		Port:                 cfg.Port,
		ShutdownTimeout:      cfg.ShutdownTimeout,
		EngineStartupTimeout: cfg.EngineStartup,
		Log:                  log,
	}
	if addrs := cfg.EngineAddrs(); addrs != nil {
		o.EngineAddr = strings.Join(addrs, ",")
		return o, nil
	}
	o.EngineExecutable = filepath.Join(filepath.Dir(self), "engine-core")
	if _, err := os.Stat(o.EngineExecutable); err != nil {
		return Options{}, fmt.Errorf("--engine spawn needs engine-core next to %s: %w", self, err)
	}
	o.EngineArgs = append([]string{"--model", cfg.Model}, cfg.SpawnArgs()...)
	return o, nil
}

// hasFlag reports whether the config struct *cfg has a field bound to the
// flag name (the `flag:"…"` tag configs.Load reads).
func hasFlag(cfg any, name string) bool {
	t := reflect.TypeOf(cfg)
	if name == "" || t == nil {
		return false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Tag.Get("flag") == name {
			return true
		}
		if f.Anonymous && hasFlag(reflect.New(f.Type).Interface(), name) {
			return true
		}
	}
	return false
}

// secretFlags are flags whose values are never logged.
var secretFlags = []string{"api-key"}

// redact returns args with the values of secretFlags replaced by "***".
func redact(args []string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		if out[i] == "--" {
			break
		}
		name, hasValue, ok := flagName(out[i])
		if !ok || !contains(secretFlags, name) {
			continue
		}
		if hasValue {
			out[i] = out[i][:strings.IndexByte(out[i], '=')+1] + "***"
		} else if i+1 < len(out) {
			i++
			out[i] = "***"
		}
	}
	return out
}
