package guard

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the addresses of the reverse proxies (an Ingress controller, a load balancer) in
// front of parley serve whose forwarding headers are believed. A request whose connection comes
// from one of them is counted against the client the proxies name: the rightmost address of
// X-Forwarded-For (or, when a request has none, of Forwarded's for= parameters) that is not
// itself a trusted proxy. Everything left of that hop was written by the client and could say
// anything. A request from any other address is its connection's client, whatever headers it
// sends. A nil *Proxies trusts no one.
//
// X-Forwarded-For is read first because every common proxy (ingress-nginx, Traefik, HAProxy, the
// cloud load balancers) appends to it; a proxy that writes only Forwarded passes a client's own
// X-Forwarded-For through, so behind one the header a client sends would be believed (docs/security.md).
type Proxies struct {
	trusted []netip.Prefix
}

// ParseProxies reads CIDRs ("10.0.0.0/8", "2001:db8::/32") or single addresses; none gives nil.
// The error names the entry that is neither.
func ParseProxies(cidrs []string) (*Proxies, error) {
	var p Proxies
	for _, s := range cidrs {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if pfx, err := netip.ParsePrefix(s); err == nil {
			p.trusted = append(p.trusted, pfx.Masked())
			continue
		}
		addr, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: want a CIDR (10.0.0.0/8) or an IP address", s)
		}
		p.trusted = append(p.trusted, netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen()))
	}
	if len(p.trusted) == 0 {
		return nil, nil
	}
	return &p, nil
}

// trusts reports whether a is one of the proxies.
func (p *Proxies) trusts(a netip.Addr) bool {
	if p == nil || !a.IsValid() {
		return false
	}
	a = a.Unmap()
	for _, pfx := range p.trusted {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// Client is the client r counts against: its IP address (an IPv6 client's /64), taken from the
// forwarding headers only when the connection comes from a trusted proxy.
func (p *Proxies) Client(r *http.Request) string {
	remote := parseHost(r.RemoteAddr)
	if !p.trusts(remote) {
		return requestClient(r)
	}
	hops := forwardedFor(r.Header)
	client := remote
	for i := len(hops) - 1; i >= 0; i-- {
		hop := parseHost(hops[i])
		if !hop.IsValid() {
			// An entry no proxy writes (garbage, "unknown", an obfuscated identifier): the hop
			// behind it cannot be placed, so the last trusted proxy is the client.
			break
		}
		client = hop
		if !p.trusts(hop) {
			break
		}
	}
	return ipKey(net.IP(client.Unmap().AsSlice()))
}

// forwardedFor lists the addresses the forwarding headers name, leftmost (the claimed original
// client) first: every X-Forwarded-For header's entries, or when there is none, every Forwarded
// element's for= value.
func forwardedFor(h http.Header) []string {
	var hops []string
	for _, v := range h.Values("X-Forwarded-For") {
		for e := range strings.SplitSeq(v, ",") {
			hops = append(hops, strings.TrimSpace(e))
		}
	}
	if len(hops) > 0 {
		return hops
	}
	for _, v := range h.Values("Forwarded") {
		for elem := range strings.SplitSeq(v, ",") {
			for pair := range strings.SplitSeq(elem, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(k, "for") {
					hops = append(hops, strings.Trim(val, `"`))
				}
			}
		}
	}
	return hops
}

// parseHost reads "192.0.2.7", "192.0.2.7:4000", "2001:db8::1", "[2001:db8::1]" and
// "[2001:db8::1]:443"; anything else is the zero Addr.
func parseHost(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr()
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}
	}
	return a
}
