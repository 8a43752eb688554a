// Package importrules holds the test that enforces ARCHITECTURE.md's import
// rules: imports point down, and engine-core and api-frontend never import
// each other, so the process boundary is a compile-time fact.
package importrules

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/sluice-llm/sluice/"

// tree returns the top-level tree of an import path of ours ("ipc",
// "engine-core", …), or "" for a path outside the module.
func tree(path string) string {
	rest, ok := strings.CutPrefix(path, mod)
	if !ok {
		return ""
	}
	return strings.SplitN(rest, "/", 2)[0]
}

// allowed lists, for each tree, the other trees it may depend on
// (transitively). A tree may always depend on itself.
var allowed = map[string][]string{
	"ipc":          {},
	"quant":        {},
	"kernels":      {"quant"},
	"configs":      {},
	"modelfile":    {"quant"},
	"internal":     {},
	"deploy":       {},
	"text":         {"modelfile", "quant"},
	"constraint":   {"ipc"},
	"scripts":      {"ipc", "configs", "modelfile", "text", "constraint", "outputproc", "quant"},
	"outputproc":   {"ipc", "modelfile", "text", "constraint", "quant"},
	"engine-core":  {"ipc", "kernels", "configs", "modelfile", "text", "constraint", "quant"},
	"api-frontend": {"ipc", "configs", "modelfile", "text", "constraint", "outputproc", "quant"},
	"bench":        {"ipc", "configs", "modelfile", "text", "outputproc", "quant"},
}

func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps=false", "-f", `{{.ImportPath}}|{{join .Deps ","}}`, mod+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, "|")
		from := tree(pkg)
		ok, known := allowed[from]
		if !known {
			t.Errorf("package %s is in tree %q, which ARCHITECTURE.md does not place; add it to the rules", pkg, from)
			continue
		}
		checked++
		for _, dep := range strings.Split(deps, ",") {
			to := tree(dep)
			if to == "" || to == from {
				continue
			}
			if to == "internal" && strings.HasSuffix(pkg, "_test") {
				continue
			}
			if !contains(ok, to) {
				t.Errorf("%s imports %s: %s may not depend on %s (ARCHITECTURE.md, layout and import rules)", pkg, dep, from, to)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no packages checked")
	}
	t.Logf("checked %d packages", checked)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hidden lists, per package, packages it must not depend on (transitively)
// although its tree may: they stay behind an interface.
var hidden = map[string][]string{
	// The engine client sees an engine connection only as its EngineConn
	// interface; ZeroMQ and the C pump stay in ipc/zmqtransport.
	"api-frontend/engineclient": {"ipc/zmqtransport"},
}

func TestHiddenPackages(t *testing.T) {
	for pkg, deny := range hidden {
		out, err := exec.Command("go", "list", "-f", `{{join .Deps ","}}`, mod+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Split(strings.TrimSpace(string(out)), ",")
		if !contains(deps, mod+"ipc") {
			t.Fatalf("go list %s: deps %q lack ipc; the check would be vacuous", pkg, deps)
		}
		for _, d := range deny {
			if contains(deps, mod+d) {
				t.Errorf("%s depends on %s, which must stay behind an interface", pkg, d)
			}
		}
	}
}

// TestRuleCatchesViolation makes sure the checker is not vacuous.
func TestRuleCatchesViolation(t *testing.T) {
	if contains(allowed["engine-core"], "api-frontend") || contains(allowed["api-frontend"], "engine-core") {
		t.Fatal("engine-core and api-frontend must never import each other")
	}
	if contains(allowed["engine-core"], "outputproc") {
		t.Fatal("engine-core must never import outputproc: it is the frontend's output path")
	}
	if contains(allowed["api-frontend"], "kernels") {
		t.Fatal("the frontend must never import kernels")
	}
	if tree(mod+"engine-core/sched") != "engine-core" || tree("github.com/other/x") != "" {
		t.Fatal("tree() misclassifies")
	}
}
