// Package configs holds the typed configuration of Sluice's two programs
// (engine-core and api-frontend): their defaults, validation with messages
// naming the bad field, and one loader that fills a config from a YAML file
// (--config), the environment (SLUICE_*) and command-line flags, flags
// winning over the environment, which wins over the file.
//
// A config is a struct whose fields carry tags:
//
//	MaxNumSeqs int `flag:"max-num-seqs" yaml:"max_num_seqs" usage:"…"`
//
// The flag name doubles as the environment name: --max-num-seqs is
// SLUICE_MAX_NUM_SEQS. Embedded structs are flattened.
package configs

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Validator is implemented by configs that can check themselves.
type Validator interface {
	Validate() error
}

// FieldError is a validation failure naming the offending field by its flag.
type FieldError struct {
	Field   string
	Message string
}

// Error formats the error as the flag's name and the message.
func (e *FieldError) Error() string { return fmt.Sprintf("--%s: %s", e.Field, e.Message) }

// Errorf builds a FieldError.
func Errorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

type field struct {
	flag, yaml, usage string
	v                 reflect.Value
}

func fields(v reflect.Value, out []field) []field {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		fv := v.Field(i)
		if sf.Anonymous && sf.Type.Kind() == reflect.Struct {
			out = fields(fv, out)
			continue
		}
		name := sf.Tag.Get("flag")
		if name == "" || name == "-" || !sf.IsExported() {
			continue
		}
		y := sf.Tag.Get("yaml")
		if y == "" {
			y = strings.ReplaceAll(name, "-", "_")
		}
		out = append(out, field{flag: name, yaml: strings.Split(y, ",")[0], usage: sf.Tag.Get("usage"), v: fv})
	}
	return out
}

// setString parses s into the field's value.
func setString(v reflect.Value, s string) error {
	switch v.Interface().(type) {
	case time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
		return nil
	case []string:
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		v.Set(reflect.ValueOf(parts))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, err := parseInt(s)
		if err != nil {
			return err
		}
		v.SetInt(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("unsupported config type %s", v.Type())
	}
	return nil
}

// parseInt accepts plain integers and byte sizes such as 2GiB, 512MB, 4k.
func parseInt(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	lower := strings.ToLower(s)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3}, {"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}} {
		if strings.HasSuffix(lower, u.suffix) {
			mult = u.m
			s = strings.TrimSpace(s[:len(s)-len(u.suffix)])
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || mult == 1 {
			return 0, err
		}
		return int64(f * float64(mult)), nil
	}
	return n * mult, nil
}

type flagValue struct{ v reflect.Value }

func (f flagValue) String() string {
	if !f.v.IsValid() {
		return ""
	}
	if s, ok := f.v.Interface().([]string); ok {
		return strings.Join(s, ",")
	}
	return fmt.Sprint(f.v.Interface())
}
func (f flagValue) Set(s string) error { return setString(f.v, s) }
func (f flagValue) IsBoolFlag() bool   { return f.v.IsValid() && f.v.Kind() == reflect.Bool }

// configPath finds --config in args without parsing the rest.
func configPath(args []string) string {
	for i, a := range args {
		for _, p := range []string{"--config", "-config"} {
			if a == p && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, p+"="); ok {
				return v
			}
		}
	}
	return ""
}

// Load fills cfg (a pointer to a config struct holding its defaults) from the
// YAML file named by --config, then SLUICE_* environment variables, then
// args. It returns the positional arguments left over. Unknown YAML keys and
// unknown flags are errors naming them. When cfg implements Validator, the
// result is validated. -h/--help prints usage to usage and returns
// flag.ErrHelp.
func Load(name string, args []string, cfg any, usage io.Writer) ([]string, error) {
	rv := reflect.ValueOf(cfg)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("configs.Load: need a pointer to a struct, got %T", cfg)
	}
	fs := fields(rv.Elem(), nil)
	if path := configPath(args); path != "" {
		if err := loadYAML(path, fs); err != nil {
			return nil, err
		}
	}
	for _, f := range fs {
		env := "SLUICE_" + strings.ToUpper(strings.ReplaceAll(f.flag, "-", "_"))
		if s, ok := os.LookupEnv(env); ok {
			if err := setString(f.v, s); err != nil {
				return nil, fmt.Errorf("environment %s=%q: %w", env, s, err)
			}
		}
	}
	set := flag.NewFlagSet(name, flag.ContinueOnError)
	if usage == nil {
		usage = io.Discard
	}
	set.SetOutput(usage)
	set.String("config", "", "YAML configuration file (flags and SLUICE_* environment variables override it)")
	for _, f := range fs {
		set.Var(flagValue{f.v}, f.flag, f.usage)
	}
	if err := set.Parse(args); err != nil {
		return nil, err
	}
	if v, ok := cfg.(Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, err
		}
	}
	return set.Args(), nil
}

func loadYAML(path string, fs []field) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config %s: %w", path, err)
	}
	var raw map[string]yaml.Node
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("parse config %s: %w", path, err)
	}
	byName := map[string]field{}
	for _, f := range fs {
		byName[f.yaml] = f
		byName[f.flag] = f
	}
	for key, node := range raw {
		f, ok := byName[key]
		if !ok {
			return fmt.Errorf("config %s: unknown field %q", path, key)
		}
		var s string
		switch node.Kind {
		case yaml.ScalarNode:
			s = node.Value
		case yaml.SequenceNode:
			var items []string
			if err := node.Decode(&items); err != nil {
				return fmt.Errorf("config %s: field %q: %w", path, key, err)
			}
			s = strings.Join(items, ",")
		default:
			return fmt.Errorf("config %s: field %q: expected a scalar or a list", path, key)
		}
		if err := setString(f.v, s); err != nil {
			return fmt.Errorf("config %s: field %q: %w", path, key, err)
		}
	}
	return nil
}

// IsHelp reports whether err is the help request from Load.
func IsHelp(err error) bool { return errors.Is(err, flag.ErrHelp) }
