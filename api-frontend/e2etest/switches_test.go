package e2etest

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// threadStat is one thread's scheduler counters, from /proc/PID/task/TID.
type threadStat struct {
	comm        string
	cpu         time.Duration // schedstat's run time
	vol, nonvol int64         // voluntary and involuntary context switches
}

// threadStats reads every thread of pid: its name, CPU time and context
// switches. A thread that exits while being read is left out.
func threadStats(pid int) (map[int]threadStat, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read threads of %d: %w", pid, err)
	}
	out := make(map[int]threadStat, len(tasks))
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		var st threadStat
		comm, err := os.ReadFile(dir + "/" + t.Name() + "/comm")
		if err != nil {
			continue
		}
		st.comm = strings.TrimSpace(string(comm))
		sched, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		if f := strings.Fields(string(sched)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			st.cpu = time.Duration(ns)
		}
		status, err := os.ReadFile(dir + "/" + t.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch k {
			case "voluntary_ctxt_switches":
				st.vol = n
			case "nonvoluntary_ctxt_switches":
				st.nonvol = n
			}
		}
		out[tid] = st
	}
	return out, nil
}

// logSwitches logs, per engine step, each thread's CPU time and context
// switches between two threadStats readings (threads that did nothing are
// summed into one line).
func logSwitches(tb testing.TB, name string, before, after map[int]threadStat, steps float64) {
	type row struct {
		tid                int
		comm               string
		cpuUS, vol, nonvol float64
	}
	var rows []row
	var idle int
	var tot row
	for tid, a := range after {
		b := before[tid] // zero for a thread started in between
		r := row{tid: tid, comm: a.comm, cpuUS: float64((a.cpu - b.cpu).Microseconds()) / steps,
			vol: float64(a.vol-b.vol) / steps, nonvol: float64(a.nonvol-b.nonvol) / steps}
		tot.cpuUS += r.cpuUS
		tot.vol += r.vol
		tot.nonvol += r.nonvol
		if r.cpuUS < 1 && r.vol < 0.01 && r.nonvol < 0.01 {
			idle++
			continue
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].cpuUS > rows[j].cpuUS })
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s phase, per step (%.0f steps): all threads %.1f µs CPU, %.2f voluntary + %.2f involuntary switches (%d threads idle)\n",
		name, steps, tot.cpuUS, tot.vol, tot.nonvol, idle)
	for _, r := range rows {
		fmt.Fprintf(&sb, "  tid %d %-16s %8.1f µs  %6.2f vol  %6.2f invol\n", r.tid, r.comm, r.cpuUS, r.vol, r.nonvol)
	}
	tb.Log(sb.String())
}
