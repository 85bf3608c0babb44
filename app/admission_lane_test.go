package app

import (
	"context"
	"testing"
	"time"
)

// TestLaneRestsAfterEachLargeReview: after a large review the lane stays closed for laneRest
// times as long as it took, so large reviews sent back to back take at most an eighth of a core.
func TestLaneRestsAfterEachLargeReview(t *testing.T) {
	var l lane
	release, ok := l.acquire(context.Background(), time.Now().Add(time.Second))
	if !ok {
		t.Fatal("a free lane was not given")
	}
	time.Sleep(200 * time.Millisecond) // the review's work
	release()
	if _, ok := l.acquire(context.Background(), time.Now().Add(50*time.Millisecond)); ok {
		t.Fatal("the lane opened right after a review of 200 ms; it should rest about 1.4 s")
	}
	if _, ok := l.acquire(context.Background(), time.Now().Add(5*time.Second)); !ok {
		t.Fatal("the lane did not open after its rest")
	}
}
