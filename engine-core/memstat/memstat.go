// Package memstat reports where the engine's resident memory is: the
// kernel's view (/proc/self/smaps_rollup: resident bytes, split into
// anonymous memory and file-backed pages such as the memory-mapped
// weights) and the Go runtime's (runtime/metrics: live heap objects, heap
// memory the runtime holds but no object uses, goroutine stacks, runtime
// metadata). The engine logs both after loading the model and when it
// stops, the way vLLM logs its memory profile.
package memstat

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
)

// Rollup is the part of /proc/PID/smaps_rollup the engine reports, in
// bytes.
type Rollup struct {
	// Rss is the resident memory of every mapping.
	Rss int64
	// Anonymous is the resident anonymous memory (the Go heap, stacks,
	// C allocations).
	Anonymous int64
	// File is Rss - Anonymous: resident pages of file mappings (the
	// memory-mapped weights, the executable and its libraries) and shared
	// memory.
	File int64
}

// ErrNoRss is returned by ParseRollup for text without an Rss line.
var ErrNoRss = errors.New("memstat: smaps_rollup has no Rss line")

// ParseKB reads the value of a /proc "Key:   N kB" line (the text after the
// colon) as bytes: N must be a non-negative decimal whose byte count fits
// in 50 bits (1 PiB), followed by the unit kB.
func ParseKB(v string) (int64, error) {
	f := strings.Fields(v)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("value %q: want \"N kB\"", strings.TrimSpace(v))
	}
	kb, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || kb < 0 || kb > 1<<40 {
		return 0, fmt.Errorf("value %q: not a size in kB", f[0])
	}
	return kb << 10, nil
}

// ParseRollup reads smaps_rollup text: "Key:   N kB" lines after the
// header line. Unknown keys are skipped; a known key with a malformed
// value is an error.
func ParseRollup(r io.Reader) (Rollup, error) {
	var ro Rollup
	var haveRss, haveAnon bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch key {
		case "Rss":
			dst, haveRss = &ro.Rss, true
		case "Anonymous":
			dst, haveAnon = &ro.Anonymous, true
		default:
			continue
		}
		n, err := ParseKB(rest)
		if err != nil {
			return Rollup{}, fmt.Errorf("memstat: %s: %w", key, err)
		}
		*dst = n
	}
	if err := sc.Err(); err != nil {
		return Rollup{}, fmt.Errorf("memstat: read smaps_rollup: %w", err)
	}
	if !haveRss {
		return Rollup{}, ErrNoRss
	}
	if !haveAnon {
		return Rollup{}, errors.New("memstat: smaps_rollup has no Anonymous line")
	}
	ro.File = ro.Rss - ro.Anonymous
	return ro, nil
}

// ReadRollup reads this process's /proc/self/smaps_rollup (Linux 4.14+).
func ReadRollup() (Rollup, error) {
	f, err := os.Open("/proc/self/smaps_rollup")
	if err != nil {
		return Rollup{}, fmt.Errorf("memstat: %w", err)
	}
	defer f.Close()
	return ParseRollup(f)
}

// GoMem is the Go runtime's memory, in bytes (runtime/metrics'
// /memory/classes).
type GoMem struct {
	// HeapObjects is the memory of live and not yet swept heap objects
	// (the KV cache and the activations are heap objects).
	HeapObjects int64
	// HeapIdle is heap memory the runtime holds without objects in it and
	// has not returned to the OS (free and unused spans): garbage
	// collection headroom.
	HeapIdle int64
	// HeapReleased is heap address space returned to the OS (not resident).
	HeapReleased int64
	// Stacks is the memory of goroutine and OS thread stacks.
	Stacks int64
	// Runtime is the runtime's own metadata, profiling buckets and other
	// bookkeeping.
	Runtime int64
	// Total is every byte the runtime has mapped (released included).
	Total int64
}

// goSamples are the runtime/metrics names GoMem sums.
var goSamples = [...]string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/stacks:bytes",
	"/memory/classes/os-stacks:bytes",
	"/memory/classes/metadata/other:bytes",
	"/memory/classes/metadata/mcache/inuse:bytes",
	"/memory/classes/metadata/mcache/free:bytes",
	"/memory/classes/metadata/mspan/inuse:bytes",
	"/memory/classes/metadata/mspan/free:bytes",
	"/memory/classes/profiling/buckets:bytes",
	"/memory/classes/other:bytes",
	"/memory/classes/total:bytes",
}

// ReadGo reads the Go runtime's memory classes.
func ReadGo() GoMem {
	s := make([]metrics.Sample, len(goSamples))
	for i, n := range goSamples {
		s[i].Name = n
	}
	metrics.Read(s)
	v := func(i int) int64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(s[i].Value.Uint64())
	}
	g := GoMem{HeapObjects: v(0), HeapIdle: v(1) + v(2), HeapReleased: v(3), Stacks: v(4) + v(5), Total: v(13)}
	for i := 6; i <= 12; i++ {
		g.Runtime += v(i)
	}
	return g
}
