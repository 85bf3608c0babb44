package app

import (
	"context"
	"testing"
	"time"
)

// TestLaneRestsAfterEachLargeReview: after a large review the lane stays closed for laneRest
// times as long as it took, so large reviews sent back to back take at most a sixteenth of a core.
func TestLaneRestsAfterEachLargeReview(t *testing.T) {
	var l lane
	release, ok := l.acquire(context.Background(), time.Now().Add(time.Second))
	if !ok {
		t.Fatal("a free lane was not given")
	}
	time.Sleep(100 * time.Millisecond) // the review's work
	release()
	// Its rest is 15 x 100 ms: still closed a second on (a rest of 7 would have opened it at 0.7 s).
	if _, ok := l.acquire(context.Background(), time.Now().Add(time.Second)); ok {
		t.Fatal("the lane opened within a second of a review of 100 ms; it should rest laneRest (15) times that")
	}
	if _, ok := l.acquire(context.Background(), time.Now().Add(5*time.Second)); !ok {
		t.Fatal("the lane did not open after its rest")
	}
}
