package app

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/gitops"
)

func budgetConfig(t *testing.T, env map[string]string) config.Config {
	t.Helper()
	base := map[string]string{"PARLEY_APP_ID": "7", "PARLEY_PRIVATE_KEY": "pem", "PARLEY_WEBHOOK_SECRETS": "a"}
	for k, v := range env {
		base[k] = v
	}
	cfg, err := config.Load("", func(k string) string { return base[k] })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The server's budgets default to the libraries' own (core.DefaultBudget, gitops.RenderProcess's),
// which app/config spells out without importing them.
func TestBudgetDefaultsAreTheLibraries(t *testing.T) {
	s := &Server{cfg: budgetConfig(t, nil)}
	s.cfg.RenderWorker = []string{"parley", "render-worker"}
	if got := readBudget(s.cfg); got != core.DefaultBudget() {
		t.Errorf("read budget %+v, want %+v", got, core.DefaultBudget())
	}
	p := s.helmRenderer().(*gitops.RenderProcess)
	if p.Timeout != gitops.DefaultRenderTimeout || p.Memory != gitops.DefaultRenderMemory || p.Parallel != gitops.DefaultRenderParallel {
		t.Errorf("render budget %s, %d bytes, %d at once; want gitops' defaults", p.Timeout, p.Memory, p.Parallel)
	}
}

// What the configuration sets is what the pull requests' check, the drift loop and the Helm
// workers are given.
func TestServerBudgetsComeFromTheConfiguration(t *testing.T) {
	s := &Server{cfg: budgetConfig(t, map[string]string{"PARLEY_MAX_FILE_SIZE": "2048", "PARLEY_MAX_FIELDS_PER_FILE": "5",
		"PARLEY_MAX_FIELDS": "6", "PARLEY_MAX_VALUE_SIZE": "7", "PARLEY_RENDER_TIMEOUT": "3s", "PARLEY_RENDER_MEMORY": "64", "PARLEY_RENDER_PARALLEL": "4"})}
	s.cfg.RenderWorker = []string{"parley", "render-worker"}
	if got, want := readBudget(s.cfg), (core.Budget{FileBytes: 2048, FieldsPerFile: 5, FieldsPerChange: 6, ValueBytes: 7}); got != want {
		t.Errorf("read budget %+v, want %+v", got, want)
	}
	p := s.helmRenderer().(*gitops.RenderProcess)
	if p.Timeout != 3*time.Second || p.Memory != 64<<20 || p.Parallel != 4 {
		t.Errorf("render budget %s, %d bytes, %d at once; want 3s, 64 MiB, 4", p.Timeout, p.Memory, p.Parallel)
	}
}

// parley serve hands the drift loop its file budget and its Helm workers their budgets.
func TestServeGivesTheDriftLoopItsBudgets(t *testing.T) {
	_, _, pemKey := fakeApp(t)
	env := map[string]string{"PARLEY_APP_ID": "99", "PARLEY_PRIVATE_KEY": string(pemKey), "PARLEY_WEBHOOK_SECRETS": "hook",
		"PARLEY_STORE": filepath.Join(t.TempDir(), "parley.db"), "PARLEY_LISTEN": "127.0.0.1:0",
		"PARLEY_GITOPS_REPOSITORY": "acme/infra", "PARLEY_MAX_FILE_SIZE": "2048", "PARLEY_RENDER_TIMEOUT": "3s"}
	cfg, err := config.Load("", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg.RenderWorker = []string{"parley", "render-worker"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := NewServer(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if srv.drift == nil || srv.drift.FileBudget != 2048 {
		t.Fatalf("the drift loop's file budget: %+v", srv.drift)
	}
	if p, ok := srv.drift.Helm.(*gitops.RenderProcess); !ok || p.Timeout != 3*time.Second {
		t.Errorf("the drift loop's Helm renderer: %#v", srv.drift.Helm)
	}
}

// When parley serve stops (closeStores, at the end of Run or when NewServer fails), the drift
// loop's render workers, kept between charts, are ended: a job after it is refused, not given to a
// worker.
func TestServeClosesItsRenderWorkers(t *testing.T) {
	_, _, pemKey := fakeApp(t)
	env := map[string]string{"PARLEY_APP_ID": "99", "PARLEY_PRIVATE_KEY": string(pemKey), "PARLEY_WEBHOOK_SECRETS": "hook",
		"PARLEY_STORE": filepath.Join(t.TempDir(), "parley.db"), "PARLEY_LISTEN": "127.0.0.1:0", "PARLEY_GITOPS_REPOSITORY": "acme/infra"}
	cfg, err := config.Load("", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg.RenderWorker = []string{filepath.Join(t.TempDir(), "no-such-parley"), "render-worker"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := NewServer(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p := srv.drift.Helm.(*gitops.RenderProcess)
	if err := srv.closeStores(); err != nil {
		t.Fatal(err)
	}
	_, err = p.BuildKustomization(ctx, gitops.KustomizeJob{Dir: "k8s/prod"})
	if err == nil || !strings.Contains(err.Error(), "k8s/prod: not built: the render process is closed") {
		t.Errorf("a build after the server closed: %v", err)
	}
}
