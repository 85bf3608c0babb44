package ledger

import (
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

func TestSnapCacheParsesEachVersionOnce(t *testing.T) {
	c := newSnapCache(2)
	h1, h2, h3 := plumbing.NewHash("01"), plumbing.NewHash("02"), plumbing.NewHash("03")
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
	// Bounded: the least recently used version goes.
	c.parse("x.tf", h3, tf)
	if c.order.Len() != 2 {
		t.Errorf("cache holds %d versions, want at most 2", c.order.Len())
	}
	if _, ok := c.items[snapKey{"infra/main.tf", h1}]; ok {
		t.Error("least recently used version was not evicted")
	}
}
