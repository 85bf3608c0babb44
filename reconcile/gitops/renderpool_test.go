package gitops

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// manyOverlays is a repository of n Flux Kustomizations, each of its own overlay of one base.
func manyOverlays(n int) map[string][]byte {
	files := map[string][]byte{
		"k8s/base/kustomization.yaml": []byte("resources: [cm.yaml]\n"),
		"k8s/base/cm.yaml":            []byte(smallConfigMap),
	}
	for i := range n {
		name := fmt.Sprintf("o%d", i)
		files["k8s/overlays/"+name+"/kustomization.yaml"] = []byte("namespace: " + name + "\nresources: [../../base]\n")
		files["clusters/"+name+".yaml"] = []byte("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: " + name +
			"\n  namespace: flux-system\nspec:\n  path: ./k8s/overlays/" + name + "\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n")
	}
	return files
}

// starts records the pids of the workers a RenderProcess starts.
func starts(p *RenderProcess) *[]int {
	var pids []int
	p.started = func(pid int) { pids = append(pids, pid) }
	return &pids
}

func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// Discovery of many overlays pays one worker's start, not one per overlay.
func TestRenderProcessKeepsOneWorkerForManyJobs(t *testing.T) {
	p := testWorker(time.Minute, 512<<20)
	p.Parallel = 1
	defer p.Close()
	pids := starts(p)
	inv, problems := DiscoverWith(context.Background(), manyOverlays(8), Options{Helm: p})
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	for i := range 8 {
		cm := deploymentField(fmt.Sprintf("o%d", i), "cm")
		cm.Group, cm.Kind = "", "ConfigMap"
		if pl, ok := inv.Locate(cm); !ok || pl.Built != fmt.Sprintf("k8s/overlays/o%d", i) {
			t.Errorf("%s: %+v, %v", cm, pl, ok)
		}
	}
	if len(*pids) != 1 {
		t.Errorf("8 overlays built by %d workers (%v), want 1", len(*pids), *pids)
	}
}

// A job stopped by its time budget kills its worker; the next job is done in a fresh one.
func TestRenderProcessStartsAFreshWorkerAfterAJobIsStopped(t *testing.T) {
	p := testWorker(2*time.Second, 512<<20)
	p.Parallel = 1
	defer p.Close()
	pids := starts(p)
	ok := KustomizeJob{Dir: "overlays/prod", Files: overlayRepo(overlayProdKustomization, nil)}
	if _, err := p.BuildKustomization(context.Background(), ok); err != nil {
		t.Fatal(err)
	}
	_, err := p.BuildKustomization(context.Background(), KustomizeJob{Dir: "k8s/overlays/prod", Files: fanningOut(23, smallConfigMap)})
	if err == nil || !strings.Contains(err.Error(), "k8s/overlays/prod: not built: stopped after 2s") {
		t.Fatalf("the overlay that fans out: %v, want it stopped by its time budget", err)
	}
	if len(*pids) != 1 || !gone((*pids)[0]) {
		t.Fatalf("workers %v: want the one that did both jobs, killed", *pids)
	}
	got, err := p.BuildKustomization(context.Background(), ok)
	if err != nil || !bytes.Contains(got, []byte("name: prod-web")) {
		t.Fatalf("the job after: %v\n%s", err, got)
	}
	if len(*pids) != 2 {
		t.Errorf("workers %v: want a second one for the job after", *pids)
	}
}

// A worker that dies between jobs (killed from outside, the kernel's OOM killer) costs its next job
// nothing: the job is done in a fresh worker.
func TestRenderProcessRedoesAJobWhoseKeptWorkerDied(t *testing.T) {
	p := testWorker(time.Minute, 512<<20)
	p.Parallel = 1
	defer p.Close()
	pids := starts(p)
	ok := KustomizeJob{Dir: "overlays/prod", Files: overlayRepo(overlayProdKustomization, nil)}
	if _, err := p.BuildKustomization(context.Background(), ok); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill((*pids)[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := p.BuildKustomization(context.Background(), ok); err != nil {
		t.Fatalf("the job after its worker died: %v", err)
	}
	if len(*pids) != 2 {
		t.Errorf("workers %v: want a second one", *pids)
	}
}

// Close ends every worker kept idle, and a job given after it is refused.
func TestRenderProcessCloseEndsItsWorkers(t *testing.T) {
	p := testWorker(time.Minute, 512<<20)
	pids := starts(p)
	_, problems := DiscoverWith(context.Background(), manyOverlays(6), Options{Helm: p})
	if len(problems) != 0 || len(*pids) == 0 {
		t.Fatalf("problems %v, workers %v", problems, *pids)
	}
	for _, pid := range *pids {
		if gone(pid) {
			t.Fatalf("worker %d ended before Close: it is not kept", pid)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range *pids {
		if !gone(pid) {
			t.Errorf("worker %d is still there after Close", pid)
		}
	}
	_, err := p.BuildKustomization(context.Background(), KustomizeJob{Dir: "k8s/overlays/o1", Files: manyOverlays(2)})
	if err == nil || !strings.Contains(err.Error(), "k8s/overlays/o1: not built: the render process is closed") {
		t.Errorf("a job after Close: %v", err)
	}
}

// misbehave is a worker that answers its first job with answer (\n for a newline) and then waits
// for its input to end, or exits at once if answer ends in <exit>.
func misbehave(answer string) {
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadBytes('\n'); err != nil {
		os.Exit(4)
	}
	answer, exit := strings.CutSuffix(answer, "<exit>")
	os.Stdout.WriteString(strings.ReplaceAll(answer, `\n`, "\n"))
	if exit {
		os.Exit(0)
	}
	io.Copy(io.Discard, in)
	os.Exit(0)
}

// What a worker writes back is not trusted to be an answer: each kind of wrong one is a clear
// error naming the overlay, and the worker is not kept.
func TestRenderProcessRefusesBadAnswers(t *testing.T) {
	for answer, want := range map[string]string{
		`not json\n`:                 `the render worker's answer: want a JSON object on one line, got "not json"`,
		`{"built":"eA=="} {"x":1}\n`: `the render worker's answer: more than one JSON object on the line`,
		`{"rendered":7}\n`:           `the render worker's answer: json: cannot unmarshal number`,
		`{"built":"eA==","pid":4}\n`: `the render worker's answer: json: unknown field "pid"`,
		`{"built":"eA==" <exit>`:     `the render worker failed (it exited before answering)`,
		`\n`:                         `the render worker's answer: want a JSON object on one line, got ""`,
		`{"built":"` + strings.Repeat("eA==", 300) + `"}\n`: `its output is above 1 KiB`,
		`<exit>`: `the render worker failed (it exited before answering)`,
	} {
		p := &RenderProcess{Command: []string{os.Args[0]}, Env: []string{workerEnv + "=answer:" + answer}, Timeout: 10 * time.Second, Memory: 1 << 10}
		pids := starts(p)
		_, err := p.BuildKustomization(context.Background(), KustomizeJob{Dir: "k8s/overlays/o1"})
		if err == nil || !strings.Contains(err.Error(), "k8s/overlays/o1: not built: "+want) {
			t.Errorf("answer %q: %v, want %q", answer, err, want)
		}
		if len(*pids) != 1 || !gone((*pids)[0]) {
			t.Errorf("answer %q: workers %v, want the one killed", answer, *pids)
		}
		p.Close()
	}
}

// The answer reader takes anything a worker writes without a panic: an answer, or an error.
func FuzzReadAnswer(f *testing.F) {
	for _, seed := range []string{"{\"built\":\"eA==\"}\n", "{\"rendered\":{\"a\":\"b\"}}\n", "{\"error\":\"x\"}\n", "not json\n", "{\"built\":", "\n", "{} {}\n", ""} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReaderSize(bytes.NewReader(data), 16)
		for {
			line, err := readFrame(r, 256)
			if err != nil {
				if len(data) > 0 && errors.Is(err, io.EOF) && !bytes.HasSuffix(data, []byte("\n")) {
					t.Fatalf("a stream ending inside a line read as its end")
				}
				return
			}
			if len(line) > 256 || !bytes.HasSuffix(line, []byte("\n")) {
				t.Fatalf("frame %q: above the cap or not a line", line)
			}
			decodeAnswer(line)
		}
	})
}

// A worker whose data segment a job grew (the Go runtime keeps what it mapped) is retired after
// that job rather than kept: the next job would have less of the memory budget than a fresh worker
// gives it.
func TestRenderProcessRetiresAWorkerAJobGrew(t *testing.T) {
	if raceDetector {
		t.Skip("under the race detector a worker cannot map a large string's shadow within its budget")
	}
	p := testWorker(time.Minute, 512<<20)
	p.Parallel = 1
	defer p.Close()
	pids := starts(p)
	job := func(n int) HelmJob {
		return HelmJob{Chart: "charts/big", Release: "big", Namespace: "prod", Files: map[string][]byte{
			"Chart.yaml":        []byte("apiVersion: v2\nname: big\nversion: 0.1.0\n"),
			"templates/cm.yaml": []byte(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  x: {{ repeat %d \"x\" | quote }}\n", n)),
		}}
	}
	for i, n := range []int{10, 10, 40 << 20, 10} {
		if _, err := p.RenderHelm(context.Background(), job(n)); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		if want := 1 + i/3; len(*pids) != want {
			t.Fatalf("after job %d (%d bytes): workers %v, want %d", i, n, *pids, want)
		}
	}
	if !gone((*pids)[0]) {
		t.Errorf("the worker the large chart grew, %d, is still there", (*pids)[0])
	}
}
