package realk8s

import "syscall"

// childAttr makes the kernel kill a child when the test process dies, so that a test binary killed
// by go test's -timeout (which skips t.Cleanup) leaves no apiserver or etcd running.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
