package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/app"
)

// runSetup serves the manifest flow (app.Setup) on addr until an App is registered and its
// credentials written, or ctx ends. announce receives the address to open, token included.
// /healthz answers, /readyz answers 503: a server without an App cannot judge anything.
func runSetup(ctx context.Context, addr string, setup *app.Setup, announce func(setupURL string)) (app.Credentials, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return app.Credentials{}, fmt.Errorf("listen %s for /setup: %w", addr, err)
	}
	done := make(chan app.Credentials, 1)
	setup.Done = func(c app.Credentials) { done <- c }
	mux := http.NewServeMux()
	mux.Handle("GET "+app.SetupPath, setup)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no GitHub App registered yet: open /setup with the token in the log", http.StatusServiceUnavailable)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	host := ln.Addr().String()
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		host = net.JoinHostPort("localhost", fmt.Sprint(tcp.Port))
	}
	announce("http://" + host + app.SetupPath + "?token=" + setup.Token)
	var creds app.Credentials
	select {
	case creds = <-done:
	case err = <-served:
		return app.Credentials{}, err
	case <-ctx.Done():
		err = ctx.Err()
	}
	// Let the browser's "registered" page finish before the listener goes.
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(shut)
	return creds, err
}

// setupForServe runs the manifest flow on serve's own listener while no App is configured: the
// token goes to the log, where only the operator reads it.
func setupForServe(ctx context.Context, listen, apiURL, publicURL, dir string, log *slog.Logger) error {
	setup := &app.Setup{Token: app.NewSetupToken(), APIURL: apiURL, PublicURL: publicURL, Dir: dir}
	creds, err := runSetup(ctx, listen, setup, func(u string) {
		// The token is logged on purpose: the log is where only the operator looks.
		log.Warn("no GitHub App configured: register it by opening /setup?token=TOKEN at serve's public address (setup_url is the listener's own)",
			"setup_url", u, "token", setup.Token, "app_dir", dir)
	})
	if err != nil {
		return err
	}
	log.Info("GitHub App registered; install it on your repositories, then serve starts", "app_id", creds.AppID,
		"install_url", creds.HTMLURL+"/installations/new", "app_dir", dir)
	return nil
}

func newAppCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "app",
		Short: "Register Parley's GitHub App",
	}
	var dir, publicURL, org, githubURL, listen string
	create := &cobra.Command{
		Use:   "create --public-url URL [--dir DIR] [--org ORG]",
		Short: "Register the GitHub App with GitHub's manifest flow and write its credentials",
		Long: `Create registers Parley's GitHub App (app.yml's manifest) in one step. It prints a local
address; open it in a browser signed in to GitHub, confirm on GitHub's page, and GitHub sends the
browser back here. The App's ID, private key and webhook secret are then written to DIR as
app-id, private-key.pem and webhook-secrets (mode 0600; existing files are never overwritten):
serve reads them with app_dir (PARLEY_APP_DIR), and the chart's Secret is made from them with
kubectl create secret generic parley-github-app --from-file=DIR.

--public-url is where GitHub will reach parley serve: the App's webhooks go to
PUBLIC_URL/webhooks/github. parley serve offers the same flow at /setup itself while no App is
configured and app_dir is set.`,
		Example: `  parley app create --public-url https://parley.example.com --dir ./parley-app
  parley app create --public-url https://parley.example.com --org acme --dir ./parley-app`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if publicURL == "" {
				return usageErr(errors.New("--public-url is required: where GitHub will send the App's webhooks (https://parley.example.com)"))
			}
			if githubURL == "" {
				githubURL = os.Getenv("PARLEY_GITHUB_URL")
			}
			if githubURL == "" {
				githubURL = "https://api.github.com/"
			}
			setup := &app.Setup{Token: app.NewSetupToken(), APIURL: githubURL, Org: org, PublicURL: publicURL, Dir: dir}
			out := cmd.OutOrStdout()
			creds, err := runSetup(cmd.Context(), listen, setup, func(u string) {
				fmt.Fprintf(out, "Open %s in a browser signed in to GitHub, and confirm the App on GitHub's page.\n", u)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "Registered GitHub App %s (ID %d); its credentials are in %s.\n", creds.Slug, creds.AppID, dir)
			fmt.Fprintf(out, "Next: install it on your repositories at %s/installations/new\n", creds.HTMLURL)
			fmt.Fprintf(out, "      then run serve with PARLEY_APP_DIR=%s (or: kubectl create secret generic parley-github-app --from-file=%s, and github.appID=%d)\n", dir, dir, creds.AppID)
			fmt.Fprintf(out, "      and check the install with PARLEY_APP_DIR=%s parley doctor\n", dir)
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&dir, "dir", "parley-app", "directory the App's credentials are written to")
	f.StringVar(&publicURL, "public-url", "", "where GitHub reaches parley serve (its webhooks go to PUBLIC_URL/webhooks/github)")
	f.StringVar(&org, "org", "", "register the App under this organisation (default: your own account)")
	f.StringVar(&githubURL, "github-url", "", "GitHub REST API base URL (default $PARLEY_GITHUB_URL, else https://api.github.com/)")
	f.StringVar(&listen, "listen", "127.0.0.1:0", "local address the browser is sent back to")
	cmd.AddCommand(create)
	return cmd
}
