package testproc

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on every
// Linux architecture Go supports).
const userHZ = 100

// CPUTime returns the CPU time (user + system) the process pid has used so
// far, from /proc/<pid>/stat, in steps of 10 ms. Tests that bound what a
// request costs compare CPUTime before and after it rather than wall time,
// which on a shared machine also counts the time spent waiting for a CPU.
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("cpu time of %d: %w", pid, err)
	}
	d, err := ParseStatCPU(string(b))
	if err != nil {
		return 0, fmt.Errorf("cpu time of %d: %w", pid, err)
	}
	return d, nil
}

// ParseStatCPU returns utime + stime from the text of a /proc/<pid>/stat
// file. The command name (field 2) is in parentheses and may itself hold
// spaces and parentheses, so fields are counted from its last ')'.
func ParseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse stat: no ')' after the command name")
	}
	// After ")": state(0) ppid(1) … utime(11) stime(12).
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("parse stat: %d fields after the command name, want ≥ 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("parse stat: cpu time %q is not a tick count", s)
		}
		if ticks > math.MaxInt64/int64(time.Second/userHZ)-n { // keep the Duration in range
			return 0, fmt.Errorf("parse stat: cpu time %q out of range", s)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}
