package gitops

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// limitMemory caps this process's data (RLIMIT_DATA: its heap and every private writable
// mapping) at n bytes: a heap arena past it cannot be mapped, and the Go runtime exits with "out
// of memory", which the parent reports. Not RLIMIT_AS: the Go runtime reserves address space it
// never uses, and a worker limited to 512 MiB of address space cannot even start. The limit is set
// by the worker itself, before it reads its job, rather than by the parent after starting it
// (prlimit), which would leave a moment unbounded; GOMEMLIMIT alone is only a target the garbage
// collector aims for, not a limit anything enforces.
func limitMemory(n int64) error {
	setGoMemoryLimit(n)
	return syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: uint64(n), Max: uint64(n)})
}

// dataSegment is a process's data segment in bytes (VmData in /proc/PID/status: what RLIMIT_DATA
// counts), false when it cannot be read.
func dataSegment(pid int) (int64, bool) {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmData:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}
