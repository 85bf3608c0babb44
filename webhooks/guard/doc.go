// Package guard bounds what a client can hold of parley serve before it has proved who it is.
//
// Nothing a request says about itself is trusted before its credentials are checked: a
// Content-Length sizes no buffer, and a client that sends its headers or body slowly, or keeps a
// connection idle, is cut off after a deadline. Listen caps open connections per client address
// and in total, refusing the rest at once with a 503 instead of leaving them in the kernel's
// backlog; Failures rate limits failed authentications per client address, so that a flood of
// wrong signatures or tokens is answered 429 before it costs a store query. The operational
// endpoints (/healthz, /readyz, /metrics) are served on a listener of their own
// (metrics_listen), which none of these caps count, so they keep answering under all of it.
//
// A client is its IP address (an IPv6 client its /64: one host commonly holds the whole
// prefix). Behind a proxy or load balancer that does not preserve client addresses every client
// is the proxy: raise or turn off the per-client caps there.
package guard
