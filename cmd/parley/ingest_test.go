package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/internal/gittest"
)

var driftExamples = []string{"../../examples/drift/k8s-audit.json", "../../examples/drift/flux.json", "../../examples/drift/kafka-agent.jsonl"}

func demoRepo(t *testing.T) (string, *gittest.Runner) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "infra")
	if _, err := demo.Build(dir); err != nil {
		t.Fatal(err)
	}
	return dir, gittest.New(t, dir)
}

func TestIngestPlansWithoutWriting(t *testing.T) {
	dir, git := demoRepo(t)
	head := git.Run("rev-parse", "HEAD")
	code, out, errOut := runCLI(t, append([]string{"ingest", "--repo", dir}, driftExamples...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"decision: yield (owner.replicas)",
		"decision: yield (rule.incident-first)",
		"git:      gate clusters/prod/apps.yaml (would commit)",
		"+    - /spec/replicas",
		"decision: veto (bounds)", "kafka-agent wants 24, above the maximum 16",
		"decision: adopt (rank)", "-  desired_capacity    = 5", "+  desired_capacity    = 9",
		"1 object(s) reverted by the GitOps tool",
		// The dry run carries its planned gates forward: the image's gate, planned at 10:05, is
		// resumed when its yield ends at 12:05, and the replicas gate is not planned twice.
		"git:      resume clusters/prod/apps.yaml (would commit)",
		"yielded; already gated in clusters/prod/apps.yaml",
		"run again with --apply to commit them",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if git.Run("rev-parse", "HEAD") != head || git.Run("status", "--porcelain") != "" {
		t.Fatal("ingest without --apply changed the repository")
	}
}

func TestIngestApplyCommitsEachVerdictOnceAndReplaysIdempotently(t *testing.T) {
	dir, git := demoRepo(t)
	state := filepath.Join(t.TempDir(), "drift.db")
	before := git.Run("rev-parse", "HEAD")
	code, out, errOut := runCLI(t, append([]string{"ingest", "--repo", dir, "--apply", "--state", state, "--author", "Parley Bot <bot@parley.example>"}, driftExamples...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	subjects := git.Run("log", "--format=%s", before+"..HEAD")
	want := []string{
		"parley: adopt desired_capacity of aws_autoscaling_group.consumer = 9 from kafka-agent",
		"parley: resume Git's /spec/template/spec/containers/0/image of Deployment prod/web",
		"parley: yield /spec/template/spec/containers/0/image of Deployment prod/web to oncall",
		"parley: yield /spec/replicas of Deployment prod/web to hpa",
	}
	if subjects != strings.Join(want, "\n") {
		t.Fatalf("commits:\n%s\nwant:\n%s", subjects, strings.Join(want, "\n"))
	}
	if got := git.Run("log", "-1", "--format=%an <%ae>", "HEAD"); got != "Parley Bot <bot@parley.example>" {
		t.Errorf("author %q", got)
	}
	kust, _ := os.ReadFile(filepath.Join(dir, "clusters/prod/apps.yaml"))
	if !strings.Contains(string(kust), "- /spec/replicas") || strings.Contains(string(kust), "containers/0/image") {
		t.Errorf("after the replay the Kustomization should gate replicas only:\n%s", kust)
	}
	if git.Run("status", "--porcelain") != "" {
		t.Fatal("work tree not clean after --apply")
	}
	// The same events again, with the same state: all taken in before, nothing written.
	head := git.Run("rev-parse", "HEAD")
	code, out, errOut = runCLI(t, append([]string{"ingest", "--repo", dir, "--apply", "--state", state, "--json"}, driftExamples...)...)
	if code != 0 {
		t.Fatalf("second run: exit %d: %s", code, errOut)
	}
	if git.Run("rev-parse", "HEAD") != head {
		t.Fatal("a replay with the same state committed again")
	}
	var rep struct {
		Batches []struct {
			Duplicates int               `json:"duplicates"`
			Results    []json.RawMessage `json:"results"`
		} `json:"batches"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	dups := 0
	for _, b := range rep.Batches {
		dups += b.Duplicates
	}
	if dups != 6 { // the 2 relevant audit events, the Flux event and the 3 CloudTrail calls
		t.Fatalf("duplicates on replay: %d, want 6", dups)
	}
}

func TestIngestRefusesBadInput(t *testing.T) {
	dir, _ := demoRepo(t)
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"kind":"EventList","items":[{"auditID": 7}]}`), 0o644)
	notJSON := filepath.Join(t.TempDir(), "x.json")
	os.WriteFile(notJSON, []byte("{\"a\":1}\nnot json"), 0o644)
	unknown := filepath.Join(t.TempDir(), "u.json")
	os.WriteFile(unknown, []byte(`{"hello":"world"}`), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{bad}, "bad.json#1: k8s-audit: decode EventList"},
		{[]string{notJSON}, "x.json: body 2 (line 2): not JSON"},
		{[]string{unknown}, "cannot tell the source"},
		{[]string{"--source", "syslog", unknown}, `--source "syslog"`},
		{[]string{"--at", "yesterday", unknown}, `--at "yesterday"`},
		{[]string{"--author", "bot", unknown}, `--author "bot"`},
		{[]string{filepath.Join(dir, "missing.json")}, "missing.json"},
	} {
		code, _, errOut := runCLI(t, append([]string{"ingest", "--repo", dir}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestVerdictsListsWhatIngestRecorded(t *testing.T) {
	dir, _ := demoRepo(t)
	state := filepath.Join(t.TempDir(), "drift.db")
	if code, _, errOut := runCLI(t, append([]string{"ingest", "--repo", dir, "--apply", "--state", state}, driftExamples...)...); code != 0 {
		t.Fatalf("ingest: %s", errOut)
	}
	code, out, errOut := runCLI(t, "verdicts", "--state", state)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"k8s:apps/Deployment/prod/web#/spec/replicas\n  decision: yield (owner.replicas)\n  winner:   hpa wants 11\n  git:      gate, commit ",
		"decision: veto (bounds)", "git:      vetoed: Git's value stands (the next terraform apply restores it); nothing to write",
		"evidence: k8s-audit/7c1e0a00-0000-4000-8000-000000000002",
		"evidence: cloudtrail/5d1a0c77-1111-4e0b-9a43-6f0d2e7c1a01",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("verdicts lack %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, "verdicts", "--state", state, "--field", "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity", "--json")
	var recs []struct {
		Verdict struct{ Decision string } `json:"verdict"`
		Commit  string                    `json:"commit"`
	}
	if err := json.Unmarshal([]byte(out), &recs); code != 0 || err != nil || len(recs) != 2 || recs[0].Verdict.Decision != "veto" || recs[1].Commit == "" {
		t.Fatalf("--field --json: exit %d, %v, %+v", code, err, recs)
	}
	if code, out, _ = runCLI(t, "verdicts", "--state", state, "--timers"); code != 0 || !strings.Contains(out, "recheck yield (owner.replicas)") {
		t.Fatalf("--timers: exit %d\n%s", code, out)
	}
	for _, bad := range [][]string{{"--state", filepath.Join(t.TempDir(), "none.db")}, {"--state", state, "--field", "nope"}} {
		if code, _, errOut := runCLI(t, append([]string{"verdicts"}, bad...)...); code != exitUsage || errOut == "" {
			t.Errorf("%v: exit %d %q", bad, code, errOut)
		}
	}
}

// parley ingest gates where the layouts need it, as the server does: a Deployment only a chart in
// the repository renders is gated in its HelmRelease, and a Terraform attribute on-call scaled during
// an incident in the resource's lifecycle ignore_changes; parley gates lists both.
func TestIngestGatesHelmAndTerraform(t *testing.T) {
	dir, git := demoRepo(t)
	for p, c := range map[string]string{
		"charts/shop/Chart.yaml":  "apiVersion: v2\nname: shop\nversion: 1.2.0\n",
		"charts/shop/values.yaml": "replicaCount: 2\n",
		"charts/shop/templates/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Chart.Name }}-api\n" +
			"spec:\n  replicas: {{ .Values.replicaCount }}\n",
		"clusters/prod/shop.yaml": "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: shop\n  namespace: flux-system\n" +
			"spec:\n  interval: 10m\n  targetNamespace: prod\n  chart:\n    spec:\n      chart: ./charts/shop\n      sourceRef:\n        kind: GitRepository\n        name: flux-system\n" +
			"  driftDetection:\n    mode: enabled\n  values:\n    replicaCount: 4\n",
	} {
		writeFile(t, filepath.Join(dir, p), c)
	}
	git.Run("add", "-A")
	git.Run("commit", "--quiet", "-m", "Install the shop chart")
	// In this repository on-call's live changes are incident responses.
	polBytes, err := os.ReadFile(filepath.Join(dir, ".parley/policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	pol := writeFile(t, filepath.Join(t.TempDir(), "policy.hcl"), strings.Replace(string(polBytes),
		`aws_principals = ["arn:aws:sts::*:assumed-role/oncall/*"]`, `aws_principals = ["arn:aws:sts::*:assumed-role/oncall/*", "arn:aws:iam::*:role/oncall"]
  motivation     = "incident"`, 1))
	events := t.TempDir()
	audit := writeFile(t, filepath.Join(events, "audit.json"), `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"level":"Request",
"auditID":"shop-hpa-1","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/prod/deployments/shop-api/scale","verb":"update",
"user":{"username":"system:serviceaccount:kube-system:horizontal-pod-autoscaler"},"userAgent":"kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/2f1c8a7/system:serviceaccount:kube-system:horizontal-pod-autoscaler",
"objectRef":{"resource":"deployments","namespace":"prod","name":"shop-api","apiGroup":"apps","apiVersion":"v1","subresource":"scale"},
"responseStatus":{"metadata":{},"code":200},"requestObject":{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"shop-api","namespace":"prod"},"spec":{"replicas":9}},
"requestReceivedTimestamp":"2026-11-20T10:00:00.000000Z","stageTimestamp":"2026-11-20T10:00:00.000000Z"}]}`)
	trail, err := os.ReadFile("../../examples/drift/kafka-agent.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	oncall := strings.NewReplacer("kafka-scaling-agent/kafka-agent-1", "oncall/alice", `role/kafka-scaling-agent`, `role/oncall`,
		`"desiredCapacity":24`, `"desiredCapacity":12`, "5d1a0c77-1111-4e0b-9a43-6f0d2e7c1a01", "5d1a0c77-2222-4e0b-9a43-6f0d2e7c1a01").
		Replace(strings.SplitN(string(trail), "\n", 2)[0])
	ct := writeFile(t, filepath.Join(events, "oncall.jsonl"), oncall+"\n")
	code, out, errOut := runCLI(t, "ingest", "--repo", dir, "--policy", pol, "--apply", "--at", "2026-11-20T10:15:00Z", audit, ct)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	subjects := git.Run("log", "--format=%s", "-2")
	for _, want := range []string{"parley: yield /spec/replicas of Deployment prod/shop-api to hpa", "parley: yield desired_capacity of aws_autoscaling_group.consumer to oncall"} {
		if !strings.Contains(subjects, want) {
			t.Fatalf("commits lack %q:\n%s\n%s", want, subjects, out)
		}
	}
	code, out, _ = runCLI(t, "gates", "--repo", dir)
	for _, want := range []string{"k8s:apps/Deployment/prod/shop-api#/spec/replicas", "HelmRelease flux-system/shop",
		"tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity", "resource aws_autoscaling_group.consumer"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("parley gates lacks %q (exit %d):\n%s", want, code, out)
		}
	}
}

// Objects of charts Parley does not fetch are still gated: in every release that installs a remote
// chart into the object's namespace, with the gate naming the object, and the commit says why.
func TestIngestGatesObjectsOfRemoteCharts(t *testing.T) {
	dir, git := demoRepo(t)
	for p, c := range map[string]string{
		"clusters/prod/podinfo.yaml": "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\n  namespace: flux-system\n" +
			"spec:\n  interval: 10m\n  targetNamespace: prod\n  chart:\n    spec:\n      chart: podinfo\n      version: 6.x\n      sourceRef:\n        kind: HelmRepository\n        name: podinfo\n" +
			"  driftDetection:\n    mode: enabled\n  values:\n    replicaCount: 2\n",
		"argocd/redis.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: redis\n  namespace: argocd\n" +
			"spec:\n  project: default\n  source:\n    repoURL: https://charts.bitnami.com/bitnami\n    chart: redis\n    targetRevision: 20.1.0\n" +
			"  destination:\n    server: https://kubernetes.default.svc\n    namespace: prod\n",
		"argocd/cache.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: cache\n  namespace: argocd\n" +
			"spec:\n  project: default\n  source:\n    repoURL: https://charts.bitnami.com/bitnami\n    chart: memcached\n    targetRevision: 7.0.0\n" +
			"  destination:\n    server: https://kubernetes.default.svc\n    namespace: staging\n",
	} {
		writeFile(t, filepath.Join(dir, p), c)
	}
	git.Run("add", "-A")
	git.Run("commit", "--quiet", "-m", "Install remote charts")
	audit := writeFile(t, filepath.Join(t.TempDir(), "audit.json"), `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[{"level":"Request",
"auditID":"podinfo-hpa-1","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/prod/deployments/podinfo/scale","verb":"update",
"user":{"username":"system:serviceaccount:kube-system:horizontal-pod-autoscaler"},
"objectRef":{"resource":"deployments","namespace":"prod","name":"podinfo","apiGroup":"apps","apiVersion":"v1","subresource":"scale"},
"responseStatus":{"metadata":{},"code":200},"requestObject":{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"podinfo","namespace":"prod"},"spec":{"replicas":7}},
"requestReceivedTimestamp":"2026-11-20T10:00:00.000000Z","stageTimestamp":"2026-11-20T10:00:00.000000Z"}]}`)
	code, out, errOut := runCLI(t, "ingest", "--repo", dir, "--apply", "--at", "2026-11-20T10:15:00Z", audit)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	if got := git.Run("log", "-1", "--format=%s"); got != "parley: yield /spec/replicas of Deployment prod/podinfo to hpa" {
		t.Fatalf("last commit %q\n%s", got, out)
	}
	body := shownMarkdown(t, git.Run("log", "-1", "--format=%b")) // the body is the pull request's Markdown
	if !strings.Contains(body, "No manifest in the repository defines Deployment prod/podinfo") ||
		!strings.Contains(body, "podinfo from HelmRepository; redis from https://charts.bitnami.com/bitnami") {
		t.Fatalf("the commit does not say why it gated remote releases:\n%s", body)
	}
	files := git.Run("show", "--name-only", "--format=", "HEAD")
	if files != "argocd/redis.yaml\nclusters/prod/podinfo.yaml" {
		t.Fatalf("files gated: %q (the staging release must be left alone)", files)
	}
	hr := git.Run("show", "HEAD:clusters/prod/podinfo.yaml")
	if !strings.Contains(hr, "- /spec/replicas") || !strings.Contains(hr, "name: podinfo") {
		t.Fatalf("the HelmRelease's gate:\n%s", hr)
	}
	code, out, _ = runCLI(t, "gates", "--repo", dir)
	for _, want := range []string{"k8s:apps/Deployment/prod/podinfo#/spec/replicas", "HelmRelease flux-system/podinfo", "Application argocd/redis"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("parley gates lacks %q (exit %d):\n%s", want, code, out)
		}
	}
}

// TestIngestFiresDueTimersBeforeABodyOfIrrelevantEvents: on-call's image yield (from the audit
// example) ends at 12:05; the next body, at 13:00, holds only a lease renewal, which touches no
// field. Its time still comes: the due timer fires before it and Git's image is resumed.
func TestIngestFiresDueTimersBeforeABodyOfIrrelevantEvents(t *testing.T) {
	dir, git := demoRepo(t)
	leases := filepath.Join(t.TempDir(), "leases.json")
	body := `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[{"level":"Metadata",
"auditID":"7c1e0a00-0000-4000-8000-0000000000aa","stage":"ResponseComplete",
"requestURI":"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler","verb":"update",
"user":{"username":"system:kube-scheduler"},"objectRef":{"resource":"leases","namespace":"kube-system",
"name":"kube-scheduler","apiGroup":"coordination.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},
"requestReceivedTimestamp":"2026-11-20T13:00:00.000000Z","stageTimestamp":"2026-11-20T13:00:00.000000Z"}]}`
	if err := os.WriteFile(leases, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	before := git.Run("rev-parse", "HEAD")
	code, out, errOut := runCLI(t, "ingest", "--repo", dir, "--apply", driftExamples[0], leases)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	subjects := git.Run("log", "--format=%s", before+"..HEAD")
	if !strings.HasPrefix(subjects, "parley: resume Git's /spec/template/spec/containers/0/image of Deployment prod/web") {
		t.Fatalf("the yield that ended at 12:05 was not resumed before the 13:00 body; commits:\n%s\n%s", subjects, out)
	}
	if !strings.Contains(out, "timers due by 2026-11-20T13:00:00Z") {
		t.Errorf("output does not show the timers firing:\n%s", out)
	}
}

// TestIngestPutsAVetoToPeopleOnAProposalBranch: the security admin tightens the consumer's IAM
// policy in the console (CloudTrail) for a CVE. IAM is immutable, so the change is vetoed and the
// checked-out branch keeps Git's value; but the policy puts the veto to people: the tightened
// policy is committed on a proposal branch with the claim's intent, motivation and evidence as
// trailers, once.
func TestIngestPutsAVetoToPeopleOnAProposalBranch(t *testing.T) {
	dir, git := demoRepo(t)
	pol := filepath.Join(t.TempDir(), "policy.hcl")
	if err := os.WriteFile(pol, []byte(demo.VetoAskPolicy()), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "drift.db")
	head := git.Run("rev-parse", "HEAD")
	args := []string{"ingest", "--repo", dir, "--apply", "--policy", pol, "--state", state, "../../examples/drift/console-iam-cve.json"}
	code, out, errOut := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	if git.Run("rev-parse", "HEAD") != head || git.Run("status", "--porcelain") != "" {
		t.Fatal("a vetoed value was written to the checked-out branch")
	}
	for _, want := range []string{"decision: veto (immutable)", "veto_ask_when claim.motivation == \"cve\" holds",
		"asking @acme/security-leads", "push it and open a pull request"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	branches := git.Run("for-each-ref", "--format=%(refname:short)", "refs/heads/parley/propose/")
	if branches == "" || strings.Contains(branches, "\n") {
		t.Fatalf("want one proposal branch, got %q", branches)
	}
	msg := git.Run("log", "-1", "--format=%B", branches)
	for _, want := range []string{"parley: propose policy of aws_iam_role_policy.consumer", "Intent: security", "Motivation: cve",
		"Parley-Decision: veto", "Parley-Evidence: cloudtrail c0ffee00-4242-4b5c-9d8e-0f1a2b3c4d5e", "@acme/security-leads: you are asked to decide",
		"Close it to keep the veto"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the proposal's message lacks %q:\n%s", want, msg)
		}
	}
	if diff := git.Run("diff", head, branches, "--", "infra/kafka/main.tf"); !strings.Contains(diff, "kafka-cluster:Connect") || strings.Contains(diff, "+      Action   = [\"kafka-cluster:Connect\", \"kafka-cluster:ReadData\", \"kafka-cluster:DescribeGroup\"]") {
		t.Errorf("the proposal does not write the vetoed policy:\n%s", diff)
	}
	// The same veto again (a new event restating the value): people were asked already.
	tip := git.Run("rev-parse", branches)
	again := filepath.Join(t.TempDir(), "again.json")
	b, _ := os.ReadFile("../../examples/drift/console-iam-cve.json")
	b = []byte(strings.NewReplacer("c0ffee00-4242", "c0ffee00-4343", "10:30:00Z", "11:30:00Z").Replace(string(b)))
	if err := os.WriteFile(again, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, "ingest", "--repo", dir, "--apply", "--policy", pol, "--state", state, again)
	if code != 0 {
		t.Fatalf("second run: exit %d: %s\n%s", code, errOut, out)
	}
	if git.Run("rev-parse", branches) != tip || git.Run("rev-parse", "HEAD") != head {
		t.Fatal("the same veto was proposed again")
	}
	if !strings.Contains(out, "people were asked on the branch "+branches) {
		t.Errorf("second run does not say people were asked already:\n%s", out)
	}
}

// shownMarkdown is the text a reader of rendered Markdown sees: no tags, entities read, no
// zero-width spaces. Parley escapes the data it quotes in a pull request's (and commit's) body, so a
// test looking for a sentence looks in what GitHub shows.
func shownMarkdown(t testing.TB, md string) string {
	t.Helper()
	var out bytes.Buffer
	if err := goldmark.New(goldmark.WithExtensions(extension.GFM)).Convert([]byte(md), &out); err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(out.String(), "")
	return strings.ReplaceAll(html.UnescapeString(text), "\u200b", "")
}

// TestIngestReplaysFirehoseBackup: the S3 backup object Firehose writes the records it could not
// deliver to (gzip JSON lines whose rawData is a CloudWatch Logs subscription message) replays
// the EKS audit events it holds with the verdicts the audit EventList itself gets.
func TestIngestReplaysFirehoseBackup(t *testing.T) {
	raw, err := os.ReadFile("../../examples/drift/k8s-audit.json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	var logEvents []map[string]any
	for i, it := range list.Items {
		logEvents = append(logEvents, map[string]any{"id": fmt.Sprint(i), "timestamp": 1763632800000, "message": `{"kind":"Event","apiVersion":"audit.k8s.io/v1",` + string(bytes.TrimPrefix(bytes.TrimSpace(it), []byte("{")))})
	}
	msg, _ := json.Marshal(map[string]any{"messageType": "DATA_MESSAGE", "owner": "111122223333", "logGroup": "/aws/eks/prod/cluster",
		"logStream": "kube-apiserver-audit-1", "subscriptionFilters": []string{"parley"}, "logEvents": logEvents})
	control := `{"messageType":"CONTROL_MESSAGE","owner":"CloudwatchLogs","logGroup":"","logStream":"","subscriptionFilters":[],"logEvents":[]}`
	var lines []byte
	for _, rec := range [][]byte{gzipBytes([]byte(control)), gzipBytes(msg)} {
		line, _ := json.Marshal(map[string]any{"attemptsMade": 24, "arrivalTimestamp": 1763632801000, "errorCode": "HttpEndpoint.DestinationException",
			"errorMessage": "The following response was received from the endpoint destination. 503", "attemptEndingTimestamp": 1763640001000,
			"rawData": base64.StdEncoding.EncodeToString(rec)})
		lines = append(append(lines, line...), '\n')
	}
	backup := filepath.Join(t.TempDir(), "parley-eks-1-2026-11-20-10-00-00-abc")
	os.WriteFile(backup, gzipBytes(lines), 0o600)

	results := func(files ...string) (string, string) {
		t.Helper()
		dir, _ := demoRepo(t)
		code, out, errOut := runCLI(t, append([]string{"ingest", "--repo", dir, "--json"}, files...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var got struct {
			Batches []struct {
				Where   string            `json:"where"`
				Source  string            `json:"source"`
				Ignored map[string]int    `json:"ignored"`
				Results []json.RawMessage `json:"results"`
			} `json:"batches"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		var res, where []string
		for _, b := range got.Batches {
			where = append(where, fmt.Sprintf("%s %s %v", b.Where, b.Source, b.Ignored))
			for _, r := range b.Results {
				res = append(res, string(r))
			}
		}
		return strings.Join(res, "\n"), strings.Join(where, "\n")
	}
	want, _ := results("../../examples/drift/k8s-audit.json")
	got, where := results(backup)
	if want == "" || got != want {
		t.Fatalf("replayed from the backup:\n%s\nwant the audit EventList's:\n%s", got, want)
	}
	if !strings.Contains(where, "firehose-backup map[control-message:1]") || !strings.Contains(where, "(firehose-backup part 1) k8s-audit") {
		t.Fatalf("batches:\n%s", where)
	}
}
