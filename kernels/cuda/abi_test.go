package cuda

// TestKernelParamLayout checks, without a GPU, that every kernel launch in
// backend.go packs its arguments exactly as the compiled kernel expects
// them: the sequence of ptr/i32/i64/f32 calls feeding each b.run is laid
// out with nvcc's alignment rules and compared with the parameter offsets
// and sizes that cuobjdump reads from the fatbin (EIATTR_KPARAM_INFO).
// backend.go is only parsed here, so this runs in the plain CPU build; it
// skips when the fatbins or cuobjdump are absent (scripts/cuda-check.sh
// provides both).

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

type kparam struct{ off, size int64 }

// skipOrFail skips, unless CUDA_CHECK_STRICT=1 (scripts/cuda-check.sh sets
// it) turns a missing prerequisite into a failure.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CUDA_CHECK_STRICT") == "1" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// kernelLayouts runs cuobjdump -elf on the fatbins and returns, per
// kernel, its parameters in ordinal order.
func kernelLayouts(t *testing.T) map[string][]kparam {
	t.Helper()
	fatbins, _ := filepath.Glob("build/*.fatbin")
	if len(fatbins) == 0 {
		skipOrFail(t, "no kernels/cuda/build/*.fatbin: run scripts/cuda-check.sh (or scripts/cuda-fatbin.sh) first")
	}
	tool := "cuobjdump"
	if root := os.Getenv("CUDA_ROOT"); root != "" {
		if p := filepath.Join(root, "bin", "cuobjdump"); fileExists(p) {
			tool = p
		}
	}
	if _, err := exec.LookPath(tool); err != nil {
		skipOrFail(t, "cuobjdump not found (set CUDA_ROOT, as scripts/cuda-check.sh does): %v", err)
	}
	section := regexp.MustCompile(`^\s*\.nv\.info\.(\w+)\s*$`)
	param := regexp.MustCompile(`Ordinal\s*:\s*0x([0-9a-f]+)\s+Offset\s*:\s*0x([0-9a-f]+)\s+Size\s*:\s*0x([0-9a-f]+)`)
	out := map[string][]kparam{}
	for _, fb := range fatbins {
		raw, err := exec.Command(tool, "-elf", fb).CombinedOutput()
		if err != nil {
			t.Fatalf("%s -elf %s: %v\n%s", tool, fb, err, raw)
		}
		cur := ""
		seen := map[string]bool{} // one cubin per kernel is enough (sm_80 comes first)
		byOrd := map[string]map[int64]kparam{}
		for _, line := range strings.Split(string(raw), "\n") {
			if m := section.FindStringSubmatch(line); m != nil {
				cur = m[1]
				if _, done := out[cur]; done || seen[cur] {
					cur = "" // a later cubin of a kernel already read
				} else {
					byOrd[cur] = map[int64]kparam{}
				}
				continue
			}
			if m := param.FindStringSubmatch(line); m != nil && cur != "" {
				ord, _ := strconv.ParseInt(m[1], 16, 64)
				off, _ := strconv.ParseInt(m[2], 16, 64)
				size, _ := strconv.ParseInt(m[3], 16, 64)
				byOrd[cur][ord] = kparam{off, size}
			}
		}
		for k, ps := range byOrd {
			seen[k] = true
			ords := make([]int64, 0, len(ps))
			for o := range ps {
				ords = append(ords, o)
			}
			sort.Slice(ords, func(i, j int) bool { return ords[i] < ords[j] })
			for _, o := range ords {
				out[k] = append(out[k], ps[o])
			}
		}
	}
	return out
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// goLaunch is one b.run call in backend.go: the kernel's field name in
// functions and the packers applied to its args, in order.
type goLaunch struct {
	field string
	pack  []string
	pos   token.Position
}

// parseBackend reads backend.go's launches and the field → kernel name
// table of loadKernels.
func parseBackend(t *testing.T) ([]goLaunch, map[string]string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "backend.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var launches []goLaunch
	names := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit: // {"kernel_name", &b.fn.field}
			if len(n.Elts) == 2 {
				lit, ok1 := n.Elts[0].(*ast.BasicLit)
				field, ok2 := fnField(n.Elts[1])
				if ok1 && ok2 && lit.Kind == token.STRING {
					name, _ := strconv.Unquote(lit.Value)
					names[field] = name
				}
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "run" || len(n.Args) != 5 {
				return true
			}
			field, ok := fnField(n.Args[0])
			if !ok {
				return true
			}
			l := goLaunch{field: field, pos: fset.Position(n.Pos())}
			for e := n.Args[4]; ; {
				c, ok := e.(*ast.CallExpr)
				if !ok {
					break
				}
				s, ok := c.Fun.(*ast.SelectorExpr)
				if !ok || s.Sel.Name == "reset" {
					break
				}
				l.pack = append([]string{s.Sel.Name}, l.pack...)
				e = s.X
			}
			launches = append(launches, l)
		}
		return true
	})
	return launches, names
}

// fnField matches &b.fn.<field>.
func fnField(e ast.Expr) (string, bool) {
	u, ok := e.(*ast.UnaryExpr)
	if !ok || u.Op != token.AND {
		return "", false
	}
	s, ok := u.X.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	if inner, ok := s.X.(*ast.SelectorExpr); !ok || inner.Sel.Name != "fn" {
		return "", false
	}
	return s.Sel.Name, true
}

// layout lays packers out as the args type does.
func layout(pack []string) []kparam {
	var out []kparam
	var off int64
	for _, p := range pack {
		size := map[string]int64{"ptr": 8, "i64": 8, "i32": 4, "f32": 4}[p]
		off = (off + size - 1) &^ (size - 1)
		out = append(out, kparam{off, size})
		off += size
	}
	return out
}

func TestKernelParamLayout(t *testing.T) {
	kernels := kernelLayouts(t)
	launches, names := parseBackend(t)
	if len(launches) < 10 || len(names) < 10 {
		t.Fatalf("parsed %d launches and %d kernel names from backend.go; the parser no longer matches it", len(launches), len(names))
	}
	launched := map[string]bool{}
	for _, l := range launches {
		name, ok := names[l.field]
		if !ok {
			t.Errorf("%s: launch of b.fn.%s, which loadKernels does not name", l.pos, l.field)
			continue
		}
		launched[name] = true
		want, ok := kernels[name]
		if !ok {
			t.Errorf("%s: kernel %s is not in the fatbins", l.pos, name)
			continue
		}
		got := layout(l.pack)
		if len(got) != len(want) {
			t.Errorf("%s: %s packs %d args %v, the kernel takes %d %v", l.pos, name, len(got), l.pack, len(want), want)
			continue
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: %s arg %d (%s) at offset %d size %d, the kernel has offset %d size %d",
					l.pos, name, i, l.pack[i], got[i].off, got[i].size, want[i].off, want[i].size)
			}
		}
	}
	for _, name := range names {
		if !launched[name] {
			t.Errorf("kernel %s is loaded but never launched", name)
		}
	}
	t.Logf("%d launches of %d kernels match their compiled parameter layouts", len(launches), len(launched))
}
