//go:build !linux

package gitops

// limitMemory on systems other than Linux only sets the garbage collector's target: their address
// space limits are not dependable for Go programs. The time budget still holds.
func limitMemory(n int64) error {
	setGoMemoryLimit(n)
	return nil
}
