//go:build !linux

package gitops

// limitMemory on systems other than Linux only sets the garbage collector's target: their address
// space limits are not dependable for Go programs. The time budget still holds.
func limitMemory(n int64) error {
	setGoMemoryLimit(n)
	return nil
}

// dataSegment is not read on systems other than Linux, where no data limit is set either: a worker
// is retired by its count of jobs alone.
func dataSegment(int) (int64, bool) { return 0, false }
