// Package guard bounds what a client can hold of parley serve before it has proved who it is.
//
// Nothing a request says about itself is trusted before its credentials are checked: a
// Content-Length sizes no buffer beyond what the Bodies budget has reserved for it, and a client
// that sends its headers or body slowly, or keeps a connection idle, is cut off after a deadline.
// Bodies caps the bytes held at once by bodies whose signature is still unchecked, in all and per
// client address, answering 503 with Retry-After beyond it before a declared body is read (a
// declared body first waits up to WaitForRoom for another to give its bytes back). Listen
// caps open connections per client address and in total, refusing the rest at once with a 503
// instead of leaving them in the kernel's backlog; with Intake, a new connection at a cap takes
// the place of an idle one first. Failures rate limits failed authentications per client address:
// past its budget a failure is answered 429 with Retry-After, only after a hold (Hold: the
// Retry-After, at most DefaultHold) so that an attacker's connection gets about an answer a second,
// and a body read under a wrong signature counts a failure per FailureBytes; a request whose
// credentials verify is never refused nor held. The operational endpoints (/healthz, /readyz, /metrics) are served on a
// listener of their own (metrics_listen), which none of these caps count, so they keep answering
// under all of it.
//
// A client is its IP address (an IPv6 client its /64: one host commonly holds the whole prefix).
// Behind a proxy or load balancer every connection is the proxy's; Proxies names the client from
// X-Forwarded-For or Forwarded for connections from configured proxies only.
package guard
