package procstat

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestTreeCPUCountsLivingChildren checks a server's CPU includes its children's (PostgreSQL's
// backends are the postmaster's children): a child that has burnt CPU and still lives is counted.
func TestTreeCPUCountsLivingChildren(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	child := exec.Command("sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; exec sleep 30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	// Wait for the loop to end: the child is then asleep with its CPU spent.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if f := Stat(child.Process.Pid); len(f) > 0 && f[0] == "S" && CPUSeconds(child.Process.Pid) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child did not burn CPU and sleep within 20 s: %v", Stat(child.Process.Pid))
		}
		time.Sleep(20 * time.Millisecond)
	}
	self, childCPU := os.Getpid(), CPUSeconds(child.Process.Pid)
	own, tree := CPUSeconds(self), TreeCPUSeconds(self)
	if tree < own+childCPU {
		t.Fatalf("tree CPU %.2f s, less than this process's %.2f s and its child's %.2f s", tree, own, childCPU)
	}
}
