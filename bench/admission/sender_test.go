package main

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestSendersNeverWait checks the load stays open loop: a request still in flight does not hold
// the next one back, every request runs, and wait returns only once all have finished.
func TestSendersNeverWait(t *testing.T) {
	s := newSenders()
	stuck, second := make(chan struct{}), make(chan struct{})
	var ran atomic.Int32
	s.do(func() { <-stuck; ran.Add(1) })
	s.do(func() { close(second); ran.Add(1) })
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("the second request waited for the first")
	}
	for range 100 {
		s.do(func() { ran.Add(1) })
	}
	waited := make(chan struct{})
	go func() { s.wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("wait returned with a request in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(stuck)
	<-waited
	if n := ran.Load(); n != 102 {
		t.Fatalf("%d of 102 requests ran", n)
	}
}
