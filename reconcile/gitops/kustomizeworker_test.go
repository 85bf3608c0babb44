package gitops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

// fanningOut is a repository whose overlay k8s/overlays/prod doubles its objects at each of depth
// levels: every level has two kustomizations (a and b, each adding its own name suffix), and each
// names both kustomizations of the level below, so the build reads the base 2^depth times. Beside
// it, k8s/overlays/ok is an ordinary overlay of another Flux Kustomization. base is the base's
// one manifest.
func fanningOut(depth int, base string) map[string][]byte {
	kustomization := func(name, path string) []byte {
		return []byte("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: " + name + "\n  namespace: flux-system\n" +
			"spec:\n  interval: 10m\n  path: " + path + "\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n")
	}
	files := map[string][]byte{
		"k8s/base/cm.yaml":                     []byte(base),
		"k8s/base/kustomization.yaml":          []byte("resources: [cm.yaml]\n"),
		"k8s/overlays/prod/kustomization.yaml": []byte(fmt.Sprintf("namespace: prod\nresources: [../l%d/a, ../l%d/b]\n", depth, depth)),
		"k8s/overlays/ok/kustomization.yaml":   []byte("namespace: ok\nnamePrefix: ok-\nresources: [../../base, web.yaml]\n"),
		"k8s/overlays/ok/web.yaml":             []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n"),
		"clusters/prod.yaml":                   kustomization("prod", "./k8s/overlays/prod"),
		"clusters/ok.yaml":                     kustomization("ok", "./k8s/overlays/ok"),
	}
	for i := 1; i <= depth; i++ {
		below := "[../../../base]"
		if i > 1 {
			below = fmt.Sprintf("[../../l%d/a, ../../l%d/b]", i-1, i-1)
		}
		for _, s := range []string{"a", "b"} {
			files[fmt.Sprintf("k8s/overlays/l%d/%s/kustomization.yaml", i, s)] = []byte("nameSuffix: -" + s + "\nresources: " + below + "\n")
		}
	}
	return files
}

const smallConfigMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: b\n"

// The attack: 23 levels build the base 2^23 times, for hours in a process of its own (krusty takes
// no context). The worker is stopped at the time budget and the overlay named; the ordinary
// overlay builds as before, in its own worker.
func TestRenderProcessStopsAnOverlayThatFansOut(t *testing.T) {
	inv, problems := DiscoverWith(context.Background(), fanningOut(23, smallConfigMap), Options{Helm: testWorker(2*time.Second, 512<<20)})
	want := "k8s/overlays/prod: not built: stopped after 2s, the time Parley gives a kustomize build; its files are read as written"
	if p := problemAbout(problems, "k8s/overlays/prod"); p != want {
		t.Errorf("problem %q, want %q; all: %v", p, want, problems)
	}
	web := deploymentField("ok", "ok-web")
	if pl, ok := inv.Locate(web); !ok || pl.Built != "k8s/overlays/ok" {
		t.Errorf("the ordinary overlay's Deployment: %+v, %v; problems %v", pl, ok, problems)
	}
}

// An overlay whose 512 copies of a 1 MB base outgrow the memory budget is stopped there, named.
func TestRenderProcessBoundsAnOverlayThatGrows(t *testing.T) {
	big := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: " + strings.Repeat("x", 1<<20) + "\n"
	files := fanningOut(9, big)
	delete(files, "clusters/ok.yaml")
	_, problems := DiscoverWith(context.Background(), files, Options{Helm: testWorker(time.Minute, 256<<20)})
	want := "k8s/overlays/prod: not built: it needs more than the 256 MiB of memory Parley gives a kustomize build; its files are read as written"
	if p := problemAbout(problems, "k8s/overlays/prod"); p != want {
		t.Errorf("problem %q, want %q; all: %v", p, want, problems)
	}
}

func TestRenderProcessKillsTheBuildWhenTheWorkIsCancelled(t *testing.T) {
	files := fanningOut(23, smallConfigMap)
	delete(files, "clusters/ok.yaml") // the one build is the prod overlay's
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := testWorker(time.Hour, 512<<20) // only the cancellation can stop it
	var pid int
	r.started = func(p int) {
		pid = p
		time.AfterFunc(500*time.Millisecond, cancel) // well inside the build
	}
	_, problems := DiscoverWith(ctx, files, Options{Helm: r})
	if pid == 0 {
		t.Fatal("no worker was started")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("worker %d is still there after the cancellation: %v", pid, err)
	}
	want := "k8s/overlays/prod: not built: cancelled (context canceled); its files are read as written"
	if p := problemAbout(problems, "k8s/overlays/prod"); p != want {
		t.Errorf("problem %q, want %q; all: %v", p, want, problems)
	}
}

// A worker's build is kustomize's, byte for byte: the job's answer is the in-process build's
// output, generators (hashed names), patches, prefixes and origin annotations included.
func TestRenderProcessBuildsAsInProcess(t *testing.T) {
	files := overlayRepo(overlayProdKustomization+`buildMetadata: [originAnnotations]
configMapGenerator:
  - name: web-config
    literals: [LOG_LEVEL=debug]
patches:
  - target: {kind: Deployment, name: web}
    patch: |-
      - op: replace
        path: /spec/replicas
        value: 5
`, nil)
	job := KustomizeJob{Dir: "overlays/prod", Files: files}
	want, err := InProcess{}.BuildKustomization(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	got, err := testWorker(time.Minute, 512<<20).BuildKustomization(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || !bytes.Contains(want, []byte("web-config-")) || !bytes.Contains(want, []byte("replicas: 5")) {
		t.Errorf("in a worker:\n%s\nin process:\n%s", got, want)
	}
	// And discovery places the overlay's objects the same way.
	in, _ := DiscoverWith(context.Background(), files, Options{})
	out, problems := DiscoverWith(context.Background(), files, Options{Helm: testWorker(time.Minute, 512<<20)})
	if len(problems) != 0 {
		t.Fatalf("problems in a worker: %v", problems)
	}
	f := core.Field{Scheme: core.SchemeKubernetes, Group: "apps", Kind: "Deployment", Namespace: "prod", Name: "prod-web", Path: "/spec/replicas"}
	wv, wok := in.RenderedValue(f)
	gv, gok := out.RenderedValue(f)
	if !wok || !gok || !wv.Equal(gv) {
		t.Errorf("%s: in process %s (%v), in a worker %s (%v)", f, wv, wok, gv, gok)
	}
}

// A kustomization kustomize refuses is reported as before, by the worker as in process: its error,
// not a worker's failure.
func TestRenderProcessReportsKustomizeErrorsAsInProcess(t *testing.T) {
	files := overlayRepo("resources:\n  - ../../missing\n", nil)
	_, want := DiscoverWith(context.Background(), files, Options{})
	_, got := DiscoverWith(context.Background(), files, Options{Helm: testWorker(time.Minute, 512<<20)})
	if fmt.Sprint(got) != fmt.Sprint(want) || len(want) == 0 || !strings.Contains(want[0].Error(), "does not build with kustomize") {
		t.Errorf("in a worker %v, in process %v", got, want)
	}
}

// Adoption builds the overlay it edits with the builder it is given: the fanning-out overlay is
// stopped at the worker's time budget, named, and nothing is written.
func TestAdoptOverlayPatchBuildsUnderTheRenderBudget(t *testing.T) {
	f := core.Field{Scheme: core.SchemeKubernetes, Kind: "ConfigMap", Namespace: "prod", Name: "cm-a-a-a-a-a-a-a-a-a-a-a-a-a-a-a-a-a-a-a-a-a-a-a", Path: "/data/a"}
	changed, err := AdoptOverlayPatch(context.Background(), testWorker(2*time.Second, 512<<20), fanningOut(23, smallConfigMap), "k8s/overlays/prod", f, core.StringValue("c"))
	if err == nil || !strings.Contains(err.Error(), "k8s/overlays/prod: not built: stopped after 2s, the time Parley gives a kustomize build") || changed != nil {
		t.Errorf("AdoptOverlayPatch: %v, %v; want the overlay named as stopped by its time budget", changed, err)
	}
}

// The render budget is what the work may use beyond the worker's own start: an ordinary overlay
// builds under a budget far below the worker binary's own data segment (a test binary like parley
// itself starts at about 100 MiB), where before every job died of the binary's size.
func TestRenderBudgetIsBeyondTheWorkersOwnMemory(t *testing.T) {
	if own, ok := dataSegment(os.Getpid()); !ok || own <= 32<<20 {
		t.Skipf("this system reports no data segment above the budget (%d bytes): nothing to show", own)
	}
	files := overlayRepo(overlayProdKustomization, nil)
	job := KustomizeJob{Dir: "overlays/prod", Files: files}
	want, err := InProcess{}.BuildKustomization(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	got, err := testWorker(time.Minute, 32<<20).BuildKustomization(context.Background(), job)
	if err != nil {
		t.Fatalf("an ordinary overlay under a 32 MiB budget: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("in a worker:\n%s\nin process:\n%s", got, want)
	}
}
