package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/app/mcptools"
	"github.com/parleyhq/parley/internal/gittest"
)

// growingShop is the demo repository with a Flux HelmRelease of a chart whose one template renders
// the shop-api Deployment and, beside it, a ConfigMap holding a 100 MB string: far above a 64 MiB
// render budget, and fine for a process that renders it without one.
func growingShop(t *testing.T) (dir, audit string) {
	t.Helper()
	dir, git := demoRepo(t)
	for p, c := range map[string]string{
		"charts/shop/Chart.yaml":  "apiVersion: v2\nname: shop\nversion: 1.2.0\n",
		"charts/shop/values.yaml": "replicaCount: 2\n",
		"charts/shop/templates/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Chart.Name }}-api\n" +
			"spec:\n  replicas: {{ .Values.replicaCount }}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: grow\ndata:\n  x: {{ repeat 100000000 \"x\" | quote }}\n",
		"clusters/prod/shop.yaml": "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: shop\n  namespace: flux-system\n" +
			"spec:\n  interval: 10m\n  targetNamespace: prod\n  chart:\n    spec:\n      chart: ./charts/shop\n      sourceRef:\n        kind: GitRepository\n        name: flux-system\n" +
			"  values:\n    replicaCount: 4\n",
	} {
		writeFile(t, filepath.Join(dir, p), c)
	}
	git.Run("add", "-A")
	git.Run("commit", "--quiet", "-m", "Install the shop chart, which grows")
	audit = writeFile(t, filepath.Join(t.TempDir(), "audit.json"), `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"level":"Request",
"auditID":"shop-hpa-1","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/prod/deployments/shop-api/scale","verb":"update",
"user":{"username":"system:serviceaccount:kube-system:horizontal-pod-autoscaler"},"userAgent":"kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/2f1c8a7/system:serviceaccount:kube-system:horizontal-pod-autoscaler",
"objectRef":{"resource":"deployments","namespace":"prod","name":"shop-api","apiGroup":"apps","apiVersion":"v1","subresource":"scale"},
"responseStatus":{"metadata":{},"code":200},"requestObject":{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"shop-api","namespace":"prod"},"spec":{"replicas":9}},
"requestReceivedTimestamp":"2026-11-20T10:00:00.000000Z","stageTimestamp":"2026-11-20T10:00:00.000000Z"}]}`)
	return dir, audit
}

// parley ingest renders charts in a worker under the render budget, as parley discover does: the
// growing chart is stopped at --render-memory, so Git holds no value for its Deployment and nothing
// is gated, where rendering it in process would have spent the memory (and gated the replicas).
func TestIngestRendersChartsUnderTheRenderBudget(t *testing.T) {
	dir, audit := growingShop(t)
	code, out, errOut := runCLI(t, "ingest", "--repo", dir, "--render-memory", "64", audit)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	if strings.Contains(out, "gate clusters/prod/shop.yaml") {
		t.Fatalf("the growing chart was rendered, its Deployment gated:\n%s", out)
	}
	if !strings.Contains(out, "hpa is the only claim, and Git does not hold the field") {
		t.Errorf("the output does not say Git holds no value for the chart's Deployment:\n%s", out)
	}
}

// parley propose (offline) renders charts under the same budget: the growing chart is stopped, so
// Git holds no value for its Deployment and the HPA's claim is uncontested, where rendering it in
// process would have spent the memory (and contested the claim with Git's 4, by rank).
func TestProposeRendersChartsUnderTheRenderBudget(t *testing.T) {
	dir, _ := growingShop(t)
	code, out, errOut := runCLI(t, "propose", "--repo", dir, "--as", "k8s-user:system:serviceaccount:kube-system:horizontal-pod-autoscaler",
		"--field", "k8s:apps/Deployment/prod/shop-api#/spec/replicas", "--value", "9", "--at", "2026-11-20T10:00:00Z", "--render-memory", "64")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	if !strings.Contains(out, "rule:     uncontested") {
		t.Errorf("the claim was judged against the growing chart's rendering:\n%s", out)
	}
}

// Budgets of zero or less are refused by name, not taken as "no budget".
func TestRenderBudgetsMustBePositive(t *testing.T) {
	dir, _ := demoRepo(t)
	for _, flag := range []string{"--render-timeout=0s", "--render-memory=0", "--render-parallel=-1"} {
		code, _, errOut := runCLI(t, "discover", "--repo", dir, flag)
		if code != 2 || !strings.Contains(errOut, "each must be above 0") {
			t.Errorf("%s: exit %d, %s", flag, code, errOut)
		}
	}
}

// parley mcp discovers under the same budgets: with the growing chart and an overlay tree that fans
// out in the repository, the HPA's proposal is answered (the overlay stopped at --render-timeout)
// and judged uncontested (the chart stopped at --render-memory), where in process the build would
// never end.
func TestMCPRendersUnderTheRenderBudget(t *testing.T) {
	dir, _ := growingShop(t)
	writeFanningOverlay(t, dir)
	git := gittest.New(t, dir)
	git.Run("add", "-A")
	git.Run("commit", "--quiet", "-m", "An overlay tree that fans out")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serverIn, clientOut := io.Pipe()
	clientIn, serverOut := io.Pipe()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"mcp", "--repo", dir, "--as", "k8s-user:system:serviceaccount:kube-system:horizontal-pod-autoscaler",
			"--at", "2026-11-20T10:00:00Z", "--render-memory", "64", "--render-timeout", "2s"}, serverIn, serverOut, &stderr)
		serverOut.Close()
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "parley-test", Version: "v0"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "propose_change",
		Arguments: map[string]any{"field": "k8s:apps/Deployment/prod/shop-api#/spec/replicas", "value": 9}})
	if err != nil || res.IsError {
		t.Fatalf("propose_change: %v %+v\n%s", err, res, stderr.String())
	}
	var out mcptools.ProposeOutput
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Accepted || out.Rule != "uncontested" {
		t.Errorf("the claim was judged against the growing chart's rendering: %+v", out)
	}
	cs.Close()
	if code := <-done; code != 0 {
		t.Errorf("parley mcp: exit %d\n%s", code, stderr.String())
	}
}

// writeOverlay adds an ordinary overlay, k8s/web, and the Flux Kustomization that applies it to
// the repository at dir: a build that succeeds, so its worker is kept.
func writeOverlay(t *testing.T, dir string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "k8s/web/kustomization.yaml"), "namespace: prod\nresources: [cm.yaml]\n")
	writeFile(t, filepath.Join(dir, "k8s/web/cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\ndata:\n  a: b\n")
	writeFile(t, filepath.Join(dir, "clusters/prod/web.yaml"), "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: web\n  namespace: flux-system\n"+
		"spec:\n  interval: 10m\n  path: ./k8s/web\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n")
}

// renderWorkersLeft lists the render workers this process started that are still running.
func renderWorkersLeft(t *testing.T) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, stat := range procs {
		b, err := os.ReadFile(stat)
		if err != nil {
			continue // it ended meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so the fields are after its ')'.
		_, rest, _ := strings.Cut(string(b), ") ")
		if f := strings.Fields(rest); len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(stat), "cmdline"))
		if strings.Contains(string(cmdline), "render-worker") {
			left = append(left, filepath.Base(filepath.Dir(stat)))
		}
	}
	return left
}

// The commands that discover a repository keep their render workers between overlays, and end
// them when they are done: no worker is left once the command returns.
func TestCommandsEndTheirRenderWorkers(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc to list processes by")
	}
	dir, git := demoRepo(t)
	writeOverlay(t, dir)
	git.Run("add", "-A")
	git.Run("commit", "--quiet", "-m", "An overlay")
	for _, args := range [][]string{
		{"discover", "--repo", dir, "--object", "k8s:core/ConfigMap/prod/web-config"},
		append([]string{"ingest", "--repo", dir}, driftExamples...),
		{"propose", "--repo", dir, "--as", "k8s-user:system:serviceaccount:kube-system:horizontal-pod-autoscaler",
			"--field", "k8s:apps/Deployment/prod/web#/spec/replicas", "--value", "9", "--at", "2026-11-20T10:00:00Z"},
	} {
		code, out, errOut := runCLI(t, args...)
		if code != 0 && code != 1 {
			t.Fatalf("%s: exit %d: %s\n%s", args[0], code, errOut, out)
		}
		if args[0] == "discover" && !strings.Contains(out, "k8s/web") {
			t.Fatalf("discover did not build the overlay:\n%s", out)
		}
		if left := renderWorkersLeft(t); len(left) != 0 {
			t.Errorf("parley %s left render workers %v running", args[0], left)
		}
	}
}
