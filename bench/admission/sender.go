package main

import "sync"

// senders runs each review's request on a goroutine of its own the moment it is due (open loop:
// nothing waits for an earlier answer), reusing goroutines that have finished their request. A
// fresh goroutine per request grows its stack from the minimum through the HTTP/2 client's calls,
// and those stack copies were a fifth of the load generator's CPU: at -rate 1000 the sender shares
// two cores with both webhooks, so every cycle it saves goes to them.
type senders struct {
	idle chan func() // unbuffered: a send succeeds only when a sender is waiting for work
	wg   sync.WaitGroup
}

func newSenders() *senders { return &senders{idle: make(chan func())} }

// do runs f now: on a waiting sender, or on a new one when every sender is busy.
func (s *senders) do(f func()) {
	select {
	case s.idle <- f:
	default:
		s.wg.Go(func() {
			f()
			for f := range s.idle {
				f()
			}
		})
	}
}

// wait ends the senders once every request has been answered. No do may follow.
func (s *senders) wait() {
	close(s.idle)
	s.wg.Wait()
}
