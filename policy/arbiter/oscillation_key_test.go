package arbiter

import (
	"strconv"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

// Two claims share a flips entry exactly when the string key the sequence was built on before
// (Identity.String, the value, the time) is the same: sources holding a colon included, where
// "a:b" + "c" and "a" + "b:c" name one identity string.
func TestFlipsKeyIsTheIdentityStringValueAndTime(t *testing.T) {
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	three, _ := core.JSONValue(3)
	four, _ := core.JSONValue(4)
	mk := func(src, id string, v core.Value, at time.Time) core.Claim {
		return core.Claim{Actor: core.Actor{Identity: core.Identity{Source: core.IdentitySource(src), ID: id}}, Value: v, At: at}
	}
	claims := []core.Claim{
		mk("k8s-user", "hpa", three, at),
		mk("k8s-user", "hpa", three, at.In(time.FixedZone("x", 3600))),
		mk("k8s-user", "hpa", four, at),
		mk("k8s-user", "hpa", three, at.Add(1)),
		mk("k8s-user", "cost", three, at),
		mk("git-author", "hpa", three, at),
		mk("a:b", "c", three, at),
		mk("a", "b:c", three, at),
		mk("a:b:c", "", three, at),
		mk("a", "b:c:", three, at),
		mk("", "a:b:c", three, at),
		mk("k8s-user", "hpa", core.ExprValue("var.x"), at),
		mk("k8s-user", "hpa", core.StringValue("${var.x}"), at),
	}
	old := func(c core.Claim) string {
		return c.Actor.Identity.String() + "\x00" + c.Value.String() + "\x00" + strconv.FormatInt(c.At.UnixNano(), 10)
	}
	for i, a := range claims {
		for j, b := range claims {
			if got, want := keyOf(a) == keyOf(b), old(a) == old(b); got != want {
				t.Errorf("claims %d and %d: same key %v, same string key %v (%q, %q)", i, j, got, want, old(a), old(b))
			}
		}
	}
}
