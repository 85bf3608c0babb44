//go:build !linux

package realk8s

import "syscall"

// childAttr: only Linux can tie a child's life to its parent's; elsewhere t.Cleanup stops them.
func childAttr() *syscall.SysProcAttr { return nil }
