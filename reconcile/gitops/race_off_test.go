//go:build !race

package gitops

const raceDetector = false
