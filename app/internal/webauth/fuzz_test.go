package webauth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzSessionCookie: whatever a browser sends as the session cookie, User never panics, and it
// accepts no payload but the one this server signed.
func FuzzSessionCookie(f *testing.F) {
	// A fixed clock, so the one cookie signed here is the same in every run: with the wall clock,
	// a cookie this key signed in an earlier run (kept in the fuzz cache, valid for its hour) was
	// accepted and taken for a forgery. The clock is past every cookie such runs made.
	now := time.Unix(4_000_000_000, 0)
	a := &Auth{cfg: Config{Key: []byte(strings.Repeat("k", 32)), Now: func() time.Time { return now }}}
	signed := a.seal(sessionCookie, session{Login: "alice", Expires: now.Add(time.Hour).Unix()})
	f.Add(signed)
	f.Add(signed + "x")
	f.Add("")
	f.Add(".")
	f.Add("e30.")
	f.Add("eyJsIjoiYWxpY2UiLCJlIjo5OTk5OTk5OTk5fQ.AAAA")
	f.Fuzz(func(t *testing.T, value string) {
		req := httptest.NewRequest(http.MethodGet, "/ui/x", nil)
		req.Header.Set("Cookie", sessionCookie+"="+value)
		login, ok := a.User(req)
		if !ok {
			return
		}
		// Only the payload this key signed can be accepted: anything else accepted is a forgery.
		payload, _, _ := strings.Cut(signed, ".")
		got, _, _ := strings.Cut(strings.TrimSpace(value), ".")
		if got != payload || login != "alice" {
			t.Fatalf("accepted %q as %q: a value this key never signed", value, login)
		}
	})
}
