package gitops

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
)

// workerEnv makes this test binary a render worker (TestMain): RenderProcess re-executes it, as
// parley serve re-executes parley, with the worker's kind as its last argument.
const workerEnv = "PARLEY_TEST_RENDER_WORKER"

func TestMain(m *testing.M) {
	if answer, ok := strings.CutPrefix(os.Getenv(workerEnv), "answer:"); ok {
		misbehave(answer) // renderpool_test.go
	}
	if os.Getenv(workerEnv) == "1" {
		if err := ServeWorker(os.Args[len(os.Args)-1], os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testWorker is a RenderProcess running this test binary as the worker.
func testWorker(timeout time.Duration, memory int64) *RenderProcess {
	return &RenderProcess{Command: []string{os.Args[0]}, Env: []string{workerEnv + "=1"}, Timeout: timeout, Memory: memory, Parallel: 2}
}

// chartRepo is a repository with a Flux HelmRelease of the chart at charts/NAME, whose one template
// is tmpl, and a well-behaved chart charts/ok beside it.
func chartRepo(name, tmpl string) map[string][]byte {
	release := func(n string) string {
		return "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: " + n + "\n  namespace: prod\nspec:\n" +
			"  chart:\n    spec:\n      chart: ./charts/" + n + "\n      sourceRef:\n        kind: GitRepository\n        name: infra\n"
	}
	return map[string][]byte{
		"releases/" + name + ".yaml":            []byte(release(name)),
		"charts/" + name + "/Chart.yaml":        []byte("apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n"),
		"charts/" + name + "/templates/cm.yaml": []byte(tmpl),
		"releases/ok.yaml":                      []byte(release("ok")),
		"charts/ok/Chart.yaml":                  []byte("apiVersion: v2\nname: ok\nversion: 0.1.0\n"),
		"charts/ok/values.yaml":                 []byte("replicas: 3\n"),
		"charts/ok/templates/deploy.yaml":       []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: {{ .Values.replicas }}\n"),
	}
}

// loop is the template of the attack: a loop of ten billion steps that writes nothing.
const loop = "{{- range until 100000 }}{{- range until 100000 }}{{- end }}{{- end }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: loop\n"

// grow is a template that builds a string far above the test's memory budget.
const grow = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: grow\ndata:\n  x: {{ repeat 400000000 \"x\" | quote }}\n"

// deploymentField is the address of a Deployment.
func deploymentField(ns, name string) core.Field {
	return core.Field{Scheme: core.SchemeKubernetes, Group: "apps", Kind: "Deployment", Namespace: ns, Name: name}
}

func problemAbout(problems []error, chart string) string {
	for _, p := range problems {
		if strings.Contains(p.Error(), chart) {
			return p.Error()
		}
	}
	return ""
}

func TestHelmProcessStopsALoopingChart(t *testing.T) {
	inv, problems := DiscoverWith(context.Background(), chartRepo("loop", loop), Options{Helm: testWorker(2*time.Second, 512<<20)})
	p := problemAbout(problems, "charts/loop")
	if !strings.Contains(p, "not rendered: stopped after 2s, the time Parley gives a chart to render") || !strings.Contains(p, "HelmRelease prod/loop") {
		t.Errorf("problem %q: want the looping chart named as stopped by its time budget; all: %v", p, problems)
	}
	// The other chart renders as before, in its own worker.
	if _, ok := inv.Locate(deploymentField("prod", "web")); !ok {
		t.Errorf("the well-behaved chart's Deployment is not in the inventory; problems %v", problems)
	}
}

func TestHelmProcessBoundsAGrowingChart(t *testing.T) {
	_, problems := DiscoverWith(context.Background(), chartRepo("grow", grow), Options{Helm: testWorker(time.Minute, 256<<20)})
	p := problemAbout(problems, "charts/grow")
	if !strings.Contains(p, "not rendered: it needs more than the 256 MiB of memory Parley gives a chart to render") {
		t.Errorf("problem %q: want the growing chart named as over its memory budget; all: %v", p, problems)
	}
}

func TestHelmProcessIsKilledWhenTheWorkIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := testWorker(time.Hour, 512<<20) // only the cancellation can stop it
	h.Parallel = 1
	var pid int
	h.started = func(p int) {
		if pid == 0 { // the first chart rendered is charts/loop: "charts/loop" sorts before "charts/ok"
			pid = p
			cancel()
		}
	}
	_, problems := DiscoverWith(ctx, chartRepo("loop", loop), Options{Helm: h})
	if pid == 0 {
		t.Fatal("no worker was started")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("worker %d is still there after the cancellation: %v", pid, err)
	}
	p := problemAbout(problems, "charts/loop")
	if !strings.Contains(p, "not rendered: cancelled") {
		t.Errorf("problem %q: want the chart named as not rendered because the work was cancelled; all: %v", p, problems)
	}
}

func TestHelmProcessRendersAsInProcess(t *testing.T) {
	files := chartRepo("ok2", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  n: {{ .Release.Name | quote }}\n  big: {{ 1000000 }}\n")
	want, wantProblems := DiscoverWith(context.Background(), files, Options{})
	got, gotProblems := DiscoverWith(context.Background(), files, Options{Helm: testWorker(time.Minute, 512<<20)})
	if len(wantProblems) != 0 || len(gotProblems) != 0 {
		t.Fatalf("problems in process %v, in a worker %v", wantProblems, gotProblems)
	}
	cm := core.Field{Scheme: core.SchemeKubernetes, Kind: "ConfigMap", Namespace: "prod", Name: "c"}
	for _, obj := range []core.Field{deploymentField("prod", "web"), cm} {
		w, wok := want.Locate(obj)
		g, gok := got.Locate(obj)
		if !wok || !gok || w.Chart != g.Chart || w.Manifest != g.Manifest {
			t.Errorf("%s: in process %+v (%v), in a worker %+v (%v)", obj, w, wok, g, gok)
		}
	}
}

// A worker that dies for want of memory is told from one that failed otherwise by the first line
// of its crash, including the runtime's own fault when a mapping is refused mid-collection.
func TestOutOfMemoryReadsTheWorkersCrash(t *testing.T) {
	for stderr, want := range map[string]bool{
		"fatal error: runtime: out of memory\n\nruntime stack:":                                      true,
		"fatal error: out of memory allocating heap arena metadata\n":                                true,
		"runtime: cannot map pages\nfatal error: cannot allocate memory":                             false, // the first line is not the fatal error
		"fatal error: runtime: cannot allocate memory\n":                                             true,
		"SIGSEGV: segmentation violation\nPC=0xcc77dd m=3 sigcode=1 addr=0x0\n\ngoroutine 0":         true,
		"fatal error: unexpected signal during runtime execution\n[signal SIGSEGV":                   true,
		"panic: runtime error: invalid memory address or nil pointer dereference\n":                  false,
		"runtime/cgo: pthread_create failed: Resource temporarily unavailable\nSIGABRT: abort":       true,
		"runtime: failed to create new OS thread (have 5 already; errno=11)\nfatal error: newosproc": true,
		"render: template: x:1: function \"nope\" not defined":                                       false,
		"": false,
	} {
		if got := outOfMemory(stderr); got != want {
			t.Errorf("outOfMemory(%q) = %v, want %v", stderr, got, want)
		}
	}
}
