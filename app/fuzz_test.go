package app

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-github/v60/github"

	"github.com/parleyhq/parley/app/internal/livestate"
	"github.com/parleyhq/parley/app/internal/repocache"
	"github.com/parleyhq/parley/internal/npmdata"
	"github.com/parleyhq/parley/webhooks/store"
)

// offline is an Installations that cannot reach GitHub: fuzzing checks decoding and filtering,
// which must end in an error or nothing, never a panic.
type offline struct{}

var errOffline = errors.New("offline")

func (offline) Client(int64) (*github.Client, error)         { return nil, errOffline }
func (offline) Token(context.Context, int64) (string, error) { return "", errOffline }
func (offline) BotLogin(context.Context) (string, error)     { return "", errOffline }

// FuzzHandlers feeds arbitrary payloads, labelled as each event Parley handles, to the handlers.
func FuzzHandlers(f *testing.F) {
	if examples, err := npmdata.WebhookExamples(); err == nil {
		for i, ex := range examples {
			if i%7 == 0 {
				f.Add(ex.Event, []byte(ex.Payload))
			}
		}
	}
	f.Add("pull_request", []byte(`{"action":"opened","pull_request":{},"repository":{},"installation":{"id":1}}`))
	f.Add("issue_comment", []byte(`{"action":"created","issue":{"pull_request":{}},"comment":{"body":"/parley hold"},"installation":{"id":1},"repository":{}}`))
	prs := &PullRequests{Installations: offline{}, Repos: &repocache.Cache{Dir: f.TempDir()}}
	// A real live state, so that edits and deletions reach it: they change it without GitHub.
	live, err := livestate.Open(context.Background(), filepath.Join(f.TempDir(), "live.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { live.Close() })
	handlers := map[string]interface {
		Handle(context.Context, store.Delivery) error
	}{
		"pull_request": prs, "check_run": &Rerequests{PullRequests: prs}, "check_suite": &Rerequests{PullRequests: prs},
		"push": &Pushes{PullRequests: prs}, "installation": &InstallationEvents{Repos: prs.Repos},
		"installation_repositories": &InstallationEvents{Repos: prs.Repos}, "issue_comment": &Comments{PullRequests: prs, Live: live},
	}
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		h, ok := handlers[event]
		if !ok {
			return
		}
		_ = h.Handle(context.Background(), store.Delivery{ID: "fuzz", Event: event, Body: body})
	})
}
