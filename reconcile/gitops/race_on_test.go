//go:build race

package gitops

// raceDetector: this test binary runs under the race detector, whose shadow memory counts against
// a worker's RLIMIT_DATA.
const raceDetector = true
