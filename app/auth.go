package app

import (
	"context"
	"net/http"

	"github.com/google/go-github/v60/github"

	"github.com/parleyhq/parley/app/internal/ghauth"
)

// InstallationAuth adapts a ghauth.App to Installations; Base is the transport under the
// authentication (ghclient's chain in production).
type InstallationAuth struct {
	App  *ghauth.App
	Base http.RoundTripper
}

// Client returns a go-github client acting as the installation.
func (a InstallationAuth) Client(installation int64) (*github.Client, error) {
	return a.App.Client(installation, a.Base)
}

// Token returns the installation's access token (for git over HTTPS).
func (a InstallationAuth) Token(ctx context.Context, installation int64) (string, error) {
	t, err := a.App.InstallationToken(ctx, installation)
	return t.Value(), err
}

// AppClient returns a go-github client acting as the App itself.
func (a InstallationAuth) AppClient() (*github.Client, error) { return a.App.AppClient(a.Base) }

// BotLogin is the App's bot login, "<app-slug>[bot]": the author of Parley's own comments.
func (a InstallationAuth) BotLogin(ctx context.Context) (string, error) {
	return a.App.BotLogin(ctx, a.Base)
}
