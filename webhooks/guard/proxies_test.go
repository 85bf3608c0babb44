package guard

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestProxiesClient: behind trusted proxies the client is the rightmost hop of X-Forwarded-For
// (or Forwarded) that is not a trusted proxy; what is left of it, and any header from a
// connection that is not a trusted proxy, is the client's own word and not believed.
func TestProxiesClient(t *testing.T) {
	p, err := ParseProxies([]string{"10.0.0.0/8", " 192.0.2.1 ", "2001:db8:ffff::/48", ""})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, remote, xff, fwd, want string
	}{
		{"direct, no headers", "198.51.100.7:1000", "", "", "198.51.100.7"},
		{"direct client's own header is ignored", "198.51.100.7:1000", "203.0.113.9", "", "198.51.100.7"},
		{"one proxy", "10.1.2.3:1000", "203.0.113.9", "", "203.0.113.9"},
		{"spoofed left of the real hop", "10.1.2.3:1000", "1.1.1.1, 203.0.113.9", "", "203.0.113.9"},
		{"two proxies", "10.1.2.3:1000", "203.0.113.9, 192.0.2.1", "", "203.0.113.9"},
		{"hops on several headers", "10.1.2.3:1000", "1.1.1.1|203.0.113.9|10.9.9.9", "", "203.0.113.9"},
		{"only proxies: the leftmost", "10.1.2.3:1000", "10.4.4.4, 192.0.2.1", "", "10.4.4.4"},
		{"garbage hop: the last trusted proxy", "10.1.2.3:1000", "203.0.113.9, nonsense", "", "10.1.2.3"},
		{"proxy without a header", "10.1.2.3:1000", "", "", "10.1.2.3"},
		{"Forwarded when no X-Forwarded-For", "10.1.2.3:1000", "", `for=1.1.1.1, for="[2001:db8:1:2::7]:4711";proto=https`, "2001:db8:1:2::/64"},
		{"X-Forwarded-For wins over Forwarded", "10.1.2.3:1000", "203.0.113.9", "for=1.1.1.1", "203.0.113.9"},
		{"IPv6 proxy, IPv4-mapped hop", "[2001:db8:ffff::1]:443", "::ffff:203.0.113.9", "", "203.0.113.9"},
		{"port on the hop", "10.1.2.3:1000", "203.0.113.9:5555", "", "203.0.113.9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/", nil)
			req.RemoteAddr = c.remote
			// "|" separates X-Forwarded-For headers: a proxy may add its own rather than append.
			for h := range strings.SplitSeq(c.xff, "|") {
				if h != "" {
					req.Header.Add("X-Forwarded-For", h)
				}
			}
			if c.fwd != "" {
				req.Header.Set("Forwarded", c.fwd)
			}
			if got := p.Client(req); got != c.want {
				t.Errorf("client = %q, want %q", got, c.want)
			}
		})
	}
	var none *Proxies
	req := httptest.NewRequest("POST", "/", nil)
	req.RemoteAddr = "10.1.2.3:1000"
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	if got := none.Client(req); got != "10.1.2.3" {
		t.Errorf("no trusted proxies: client = %q, want the connection's", got)
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0.1-10.0.0.9"} {
		if _, err := ParseProxies([]string{bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseProxies(%q) = %v, want an error naming it", bad, err)
		}
	}
}

// FuzzProxiesClient: any forwarding headers give a client key without panicking: an IP address
// or /64 prefix, or the connection's own address.
func FuzzProxiesClient(f *testing.F) {
	f.Add("203.0.113.9, 10.0.0.1", `for="[2001:db8::1]:4711"`)
	f.Add("", "for=unknown;by=_hidden, for=192.0.2.60")
	f.Add("[::1]:80,,", `for="`)
	f.Add("::ffff:10.0.0.1%eth0", "FOR=10.1.1.1")
	p, err := ParseProxies([]string{"10.0.0.0/8", "::1/128"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, xff, fwd string) {
		req := httptest.NewRequest("POST", "/", nil)
		req.RemoteAddr = "10.1.2.3:1000"
		req.Header.Set("X-Forwarded-For", xff)
		req.Header.Set("Forwarded", fwd)
		got := p.Client(req)
		if a := parseHost(strings.TrimSuffix(got, "/64")); !a.IsValid() {
			t.Fatalf("client %q is not an address", got)
		}
	})
}
