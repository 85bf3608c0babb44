package app

// Serve's watch on its own App key: an install whose key is no key of its App used to start and
// report ready, and the first pull request found out. Serve asks GitHub GET /app at start and then
// periodically; while GitHub rejects the key, /readyz fails and says so. GitHub not answering is
// not a rejected key: readiness stays up (restarting the pod would not bring GitHub back) and
// the answer says the key is unchecked.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/google/go-github/v60/github"
)

// What serve last learnt of its App key.
const (
	keyUnchecked   = ""
	keyAccepted    = "accepted"
	keyRejected    = "rejected"
	keyUnreachable = "unreachable"
)

// keyRetry is how soon a rejected or unanswered check is repeated (bounded by the interval).
const keyRetry = 30 * time.Second

// appKeyState is the last check's outcome; the zero value is unchecked.
type appKeyState struct {
	mu     sync.Mutex
	status string
	detail string
	at     time.Time
}

func (k *appKeyState) set(status, detail string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.status, k.detail, k.at = status, detail, time.Now()
}

func (k *appKeyState) get() (status, detail string, at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.status, k.detail, k.at
}

// checkAppKey asks GitHub whether it accepts the App's JWT, within 10 seconds.
func checkAppKey(ctx context.Context, client func() (*github.Client, error)) (status, detail string) {
	c, err := client()
	if err != nil {
		return keyRejected, err.Error() // the key does not even sign: no GitHub will take it
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	app, _, err := c.Apps.Get(ctx, "")
	var ge *github.ErrorResponse
	switch {
	case err == nil:
		return keyAccepted, fmt.Sprintf("App %s (ID %d)", app.GetSlug(), app.GetID())
	case errors.As(err, &ge) && ge.Response != nil && (ge.Response.StatusCode == http.StatusUnauthorized || ge.Response.StatusCode == http.StatusForbidden):
		return keyRejected, fmt.Sprintf("%d %s", ge.Response.StatusCode, ge.Message)
	default:
		return keyUnreachable, err.Error()
	}
}

// watchAppKey checks the key now and every interval (sooner, every keyRetry, while it is not
// accepted) until ctx ends. It logs each change of outcome.
func (s *Server) watchAppKey(ctx context.Context, client func() (*github.Client, error), interval time.Duration) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		status, detail := checkAppKey(ctx, client)
		if ctx.Err() != nil {
			return
		}
		if prev, _, _ := s.appKey.get(); prev != status {
			switch status {
			case keyRejected:
				s.log.Error("GitHub rejects the App's key: not ready until it accepts it (app_id and the private key must be the same App's; parley doctor says more)", "app_id", s.cfg.AppID, "error", detail)
			case keyUnreachable:
				s.log.Warn("GitHub did not answer the App key check; the key is unchecked", "error", detail)
			default:
				s.log.Info("GitHub accepts the App's key", "app", detail)
			}
		}
		s.appKey.set(status, detail)
		next := interval
		if status != keyAccepted {
			next = min(interval, keyRetry)
		}
		t.Reset(next)
	}
}

// appKeyReadiness is what /readyz says of the key: ok false while GitHub rejects it.
func (s *Server) appKeyReadiness() (ok bool, note string) {
	status, detail, at := s.appKey.get()
	switch status {
	case keyRejected:
		return false, fmt.Sprintf("GitHub rejects the App's key (%s, checked %s): app_id %d and the private key must be the same App's; run parley doctor",
			detail, at.UTC().Format(time.RFC3339), s.cfg.AppID)
	case keyUnreachable:
		return true, fmt.Sprintf("GitHub did not answer the App key check (%s, %s): the key is unchecked, not rejected", detail, at.UTC().Format(time.RFC3339))
	}
	return true, ""
}
