package ledger

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

func TestSnapCacheParsesEachVersionOnce(t *testing.T) {
	c := newSnapCache(1 << 20)
	h1, h2 := plumbing.NewHash("01"), plumbing.NewHash("02")
	tf := []byte("resource \"aws_autoscaling_group\" \"a\" {\n  desired_capacity = 4\n}\n")
	a, err := c.parse("infra/main.tf", h1, tf)
	if err != nil || a.Len() == 0 {
		t.Fatalf("parse: %v, %d fields", err, a.Len())
	}
	// The cache answers by (path, blob): the data is not read again.
	if b, _ := c.parse("infra/main.tf", h1, nil); b != a {
		t.Errorf("second parse of the same version was not served from the cache")
	}
	// Another path with the same blob is another version (another module).
	if b, _ := c.parse("other/main.tf", h1, tf); b == a || b.Fields()[0] == a.Fields()[0] {
		t.Errorf("same blob under another path must be parsed for that path")
	}
	// A failed parse is kept as a failure.
	if _, err := c.parse("k8s/bad.yaml", h2, []byte("kind: [")); err == nil {
		t.Fatal("broken YAML parsed")
	}
	if _, err := c.parse("k8s/bad.yaml", h2, nil); err == nil {
		t.Error("cached failure lost its error")
	}
}

// TestLRUIsBoundedInBytes: one large version pushes out many small ones, and a value larger than
// the bound is not kept at all.
func TestLRUIsBoundedInBytes(t *testing.T) {
	c := newLRU[int, string](100)
	for i := range 10 {
		c.add(i, "small", 10)
	}
	if c.used != 100 || c.order.Len() != 10 {
		t.Fatalf("10 values of 10 bytes: used %d, %d kept", c.used, c.order.Len())
	}
	c.peek(0) // recently used: stays
	c.add(100, "large", 55)
	if c.used > 100 {
		t.Errorf("used %d bytes of 100", c.used)
	}
	if _, ok := c.peek(0); !ok {
		t.Error("the most recently used value was evicted")
	}
	if _, ok := c.peek(1); ok {
		t.Error("the least recently used value was kept")
	}
	c.add(200, "huge", 101)
	if _, ok := c.peek(200); ok {
		t.Error("a value larger than the bound was kept")
	}
}

// TestLRUComputesOnceForConcurrentCallers: parse workers asking for one version at once parse it
// once.
func TestLRUComputesOnceForConcurrentCallers(t *testing.T) {
	c := newLRU[string, int](1 << 10)
	var calls atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	got := make([]int, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = c.get("k", func() (int, int) { calls.Add(1); <-release; return 42, 1 })
		}()
	}
	close(release)
	wg.Wait()
	if calls.Load() != 1 {
		t.Errorf("computed %d times, want once", calls.Load())
	}
	for _, v := range got {
		if v != 42 {
			t.Errorf("a caller got %d", v)
		}
	}
}
