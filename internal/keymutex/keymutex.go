// Package keymutex serialises work per key inside one process: deliveries of the same pull
// request judged by two workers one after the other, not side by side. Across processes the caller
// adds a lock they share (a PostgreSQL advisory lock); this one keeps a process from spending a
// database session per waiting goroutine on it.
package keymutex

import (
	"context"
	"sync"
)

// Map holds one lock per key, created when first wanted and dropped when no one holds or waits
// for it. The zero Map is ready to use.
type Map struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	held chan struct{} // a token in it: held
	refs int           // holders and waiters
}

// Lock waits until key is free, or ctx ends, and returns the function that frees it.
func (m *Map) Lock(ctx context.Context, key string) (func(), error) {
	m.mu.Lock()
	if m.m == nil {
		m.m = map[string]*entry{}
	}
	e := m.m[key]
	if e == nil {
		e = &entry{held: make(chan struct{}, 1)}
		m.m[key] = e
	}
	e.refs++
	m.mu.Unlock()
	select {
	case e.held <- struct{}{}:
		return func() {
			<-e.held
			m.drop(key, e)
		}, nil
	case <-ctx.Done():
		m.drop(key, e)
		return nil, ctx.Err()
	}
}

func (m *Map) drop(key string, e *entry) {
	m.mu.Lock()
	e.refs--
	if e.refs == 0 {
		delete(m.m, key)
	}
	m.mu.Unlock()
}

// Len is the number of keys held or waited for.
func (m *Map) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
