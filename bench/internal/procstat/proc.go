// Package procstat reads what the benchmark programs report of the processes they run: CPU time,
// resident memory and the load average, from Linux's /proc.
package procstat

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// userHZ is the unit of /proc/<pid>/stat's CPU times: USER_HZ, 100 on every Linux architecture Go
// supports.
const userHZ = 100

// Stat is the fields of /proc/<pid>/stat after the command name (which may hold spaces and
// parentheses: the fields start past its last ')'), so Stat(pid)[0] is field 3, the state.
func Stat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// ticks sums the fields of f at the given 0-based indexes of procStat's slice.
func ticks(f []string, idx ...int) float64 {
	var t float64
	for _, i := range idx {
		if i < len(f) {
			v, _ := strconv.ParseFloat(f[i], 64)
			t += v
		}
	}
	return t
}

// CPUSeconds is the user and system CPU time the process has used so far.
func CPUSeconds(pid int) float64 {
	f := Stat(pid)
	if len(f) < 13 {
		return math.NaN()
	}
	return ticks(f, 11, 12) / userHZ // fields 14 and 15: utime, stime
}

// TreeCPUSeconds is the CPU time a server of processes has used so far: the parent's own, its
// reaped children's (cutime, cstime: a backend that ended during the load) and its living
// children's (PostgreSQL's backends, checkpointer, WAL writer). A child born during the load
// counts from zero, so the difference of two readings is the tree's CPU between them.
func TreeCPUSeconds(pid int) float64 {
	f := Stat(pid)
	if len(f) < 15 {
		return math.NaN()
	}
	total := ticks(f, 11, 12, 13, 14)
	parent := strconv.Itoa(pid)
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		child, err := strconv.Atoi(filepath.Base(filepath.Dir(s)))
		if err != nil || child == pid {
			continue
		}
		if cf := Stat(child); len(cf) > 12 && cf[1] == parent { // field 4: the parent's pid
			total += ticks(cf, 11, 12)
		}
	}
	return total / userHZ
}

// Status is a kB field of /proc/<pid>/status ("VmHWM:", "VmRSS:"), 0 when unreadable.
func Status(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// LoadAverage is the 1-minute load average (/proc/loadavg's first field).
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}
