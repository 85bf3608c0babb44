package app

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"testing"

	"github.com/parleyhq/parley/app/config"
)

// runServe loads env as parley serve's configuration, starts the server and returns it with its
// base URL and the function that stops it (and returns Run's error); the test's end stops it too.
func runServe(tb testing.TB, env map[string]string) (srv *Server, base string, stop func() error) {
	tb.Helper()
	return runServeFile(tb, "", env)
}

// runServeFile is runServe with a configuration file too.
func runServeFile(tb testing.TB, path string, env map[string]string) (srv *Server, base string, stop func() error) {
	tb.Helper()
	return runServeLogged(tb, path, env, slog.New(slog.DiscardHandler))
}

// runServeLogged is runServeFile with serve's log written to log.
func runServeLogged(tb testing.TB, path string, env map[string]string, log *slog.Logger) (srv *Server, base string, stop func() error) {
	tb.Helper()
	if _, ok := env["PARLEY_GITHUB_URL"]; !ok {
		// No GitHub of the test's own: never ask api.github.com whether it accepts the App's key.
		if _, ok := env["PARLEY_APP_KEY_CHECK_INTERVAL"]; !ok {
			env = maps.Clone(env)
			env["PARLEY_APP_KEY_CHECK_INTERVAL"] = "0"
		}
	}
	cfg, err := config.Load(path, func(k string) string { return env[k] })
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err = NewServer(ctx, cfg, log)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, func(a string) { addr <- a }) }()
	select {
	case a := <-addr:
		base = "http://" + a
	case err := <-done:
		cancel()
		tb.Fatalf("parley serve stopped before it listened: %v", err)
	}
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	tb.Cleanup(func() { stop() })
	return srv, base, stop
}
