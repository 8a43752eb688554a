// Command schemagen turns Kubernetes' OpenAPI v2 document (swagger.json, shipped in
// the k8s.io/kubernetes module under api/openapi-spec/) into the per-kind strict
// JSON schemas that kubeconform reads offline: one file per kind named
// <kind>[-<group>]-<version>.json, holding every definition with
// additionalProperties set to false on objects that list their properties (what
// `kubeconform -strict` expects), and int-or-string types widened to accept both.
//
//	schemagen -swagger .../swagger.json -out DIR Deployment.apps/v1 Service.v1 …
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	swagger := flag.String("swagger", "", "path to swagger.json")
	out := flag.String("out", "", "output directory")
	flag.Parse()
	if err := run(*swagger, *out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
}

func run(swaggerPath, out string, kinds []string) error {
	data, err := os.ReadFile(swaggerPath)
	if err != nil {
		return fmt.Errorf("read %s: %w", swaggerPath, err)
	}
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("parse %s: %w", swaggerPath, err)
	}
	for _, def := range doc.Definitions {
		strict(def)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, k := range kinds {
		// Kind.group/version, or Kind.version for the core group.
		kind, gv, ok := strings.Cut(k, ".")
		if !ok {
			return fmt.Errorf("kind %q: want Kind.group/version or Kind.version", k)
		}
		group, version, hasGroup := strings.Cut(gv, "/")
		if !hasGroup {
			group, version = "", gv
		}
		name := findDefinition(doc.Definitions, kind, group, version)
		if name == "" {
			return fmt.Errorf("no definition for %s", k)
		}
		schema := map[string]any{"$ref": "#/definitions/" + name, "definitions": doc.Definitions}
		file := strings.ToLower(kind)
		if group != "" {
			file += "-" + strings.Split(group, ".")[0]
		}
		file += "-" + version + ".json"
		b, _ := json.Marshal(schema)
		if err := os.WriteFile(filepath.Join(out, file), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// findDefinition finds the definition whose x-kubernetes-group-version-kind
// matches.
func findDefinition(defs map[string]map[string]any, kind, group, version string) string {
	for name, def := range defs {
		gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			m, _ := g.(map[string]any)
			if m["kind"] == kind && m["group"] == group && m["version"] == version {
				return name
			}
		}
	}
	return ""
}

// strict closes objects and widens int-or-string, recursively.
func strict(v any) {
	switch m := v.(type) {
	case map[string]any:
		if m["format"] == "int-or-string" {
			delete(m, "type")
			delete(m, "format")
			m["oneOf"] = []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}
		}
		if _, has := m["properties"]; has {
			if _, set := m["additionalProperties"]; !set {
				m["additionalProperties"] = false
			}
		}
		for _, x := range m {
			strict(x)
		}
	case []any:
		for _, x := range m {
			strict(x)
		}
	}
}
