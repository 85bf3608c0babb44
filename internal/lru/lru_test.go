package lru

import (
	"fmt"
	"sync"
	"testing"
)

// The least recently used entry goes first, when there are too many entries or they cost too
// much; a Get makes an entry the most recent; adding a kept key keeps its first value.
func TestCacheDropsTheLeastRecentlyUsed(t *testing.T) {
	var c Cache[string, int]
	c.Add("a", 1, 10, 3, 100)
	c.Add("b", 2, 10, 3, 100)
	c.Add("c", 3, 10, 3, 100)
	if _, ok := c.Get("a"); !ok { // a is now the most recent; b the least
		t.Fatal("a not kept")
	}
	c.Add("d", 4, 10, 3, 100)
	if _, ok := c.Get("b"); ok {
		t.Fatal("b kept past three entries; it was the least recently used")
	}
	for _, k := range []string{"a", "c", "d"} {
		if _, ok := c.Get(k); !ok {
			t.Fatalf("%s dropped", k)
		}
	}
	c.Add("a", 99, 10, 3, 100)
	if v, _ := c.Get("a"); v != 1 {
		t.Fatalf("a = %d after adding it again, want its first value 1", v)
	}
	c.Add("big", 5, 75, 10, 100) // 10+10+10+75 > 100: the least recent (c) goes
	if n, cost := c.Len(); cost != 95 || n != 3 {
		t.Fatalf("%d entries costing %d, want 3 costing 95", n, cost)
	}
	if _, ok := c.Get("c"); ok {
		t.Fatal("c kept past the cost; it was the least recently used")
	}
	if _, ok := c.Get("big"); !ok {
		t.Fatal("the entry just added was dropped")
	}
}

// Any number of goroutines may use one cache; the bounds hold throughout.
func TestCacheIsSafeForConcurrentUse(t *testing.T) {
	var c Cache[int, string]
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				k := (g*500 + i) % 300
				if _, ok := c.Get(k); !ok {
					c.Add(k, fmt.Sprint(k), k%7+1, 100, 250)
				}
			}
		})
	}
	wg.Wait()
	if n, cost := c.Len(); n > 100 || cost > 250 {
		t.Fatalf("%d entries costing %d, past the bounds 100 and 250", n, cost)
	}
}
