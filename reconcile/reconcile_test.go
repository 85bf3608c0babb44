package reconcile

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/policy/arbiter"
	"github.com/parleyhq/parley/reconcile/driftstate"
	"github.com/parleyhq/parley/reconcile/events"
	"github.com/parleyhq/parley/reconcile/gitops"
	"github.com/parleyhq/parley/reconcile/internal/gitwrite"
	"github.com/parleyhq/parley/trailers/ledger"
)

// env is the demo repository (a Flux Kustomization applying k8s/prod, the Kafka consumer group in
// Terraform, the demo policy) with a reconciler committing into it, as `parley ingest --apply` does.
type env struct {
	t     *testing.T
	dir   string
	git   *gittest.Runner
	led   *ledger.Ledger
	state *driftstate.DB
	rec   *Reconciler
	now   time.Time
}

var (
	t0       = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	replicas = core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	image    = core.K8sField("apps", "Deployment", "prod", "web", "/spec/template/spec/containers/0/image")
	capacity = core.TFField("infra/kafka", "aws_autoscaling_group.consumer", "/desired_capacity")
	lagAlarm = core.TFField("infra/kafka", "aws_cloudwatch_metric_alarm.consumer_lag", "/threshold")
)

const (
	hpaUser   = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
	agentRole = "arn:aws:sts::123456789012:assumed-role/kafka-scaling-agent/agent-1"
	oncallARN = "arn:aws:sts::123456789012:assumed-role/oncall/alice"
	fluxFile  = "clusters/prod/apps.yaml"
)

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "infra")
	if _, err := demo.Build(dir); err != nil {
		t.Fatal(err)
	}
	led, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	st, err := driftstate.Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{t: t, dir: dir, git: gittest.New(t, dir), led: led, state: st, now: t0}
	e.rec = &Reconciler{State: st, Now: func() time.Time { return e.now },
		Writer: &LocalWriter{Dir: dir, Author: object.Signature{Name: "Parley", Email: "parley@parley.example"}, Now: func() time.Time { return e.now }}}
	return e
}

func (e *env) snapshot() Snapshot {
	e.t.Helper()
	s, err := LoadSnapshot(context.Background(), e.dir, "main", ".parley/policy.hcl", e.led, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) ingest(source string, body []byte) Report {
	e.t.Helper()
	snap := e.snapshot()
	b, err := Decode(source, body, snap.Files)
	if err != nil {
		e.t.Fatal(err)
	}
	rep, err := e.rec.Ingest(context.Background(), snap, b)
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

func (e *env) commits() int {
	var n int
	fmt.Sscan(e.git.Run("rev-list", "--count", "HEAD"), &n)
	return n
}

func (e *env) file(p string) string {
	b, err := os.ReadFile(filepath.Join(e.dir, p))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

func only(t *testing.T, rep Report, f core.Field) Result {
	t.Helper()
	for _, r := range rep.Results {
		if r.Verdict.Field == f {
			return r
		}
	}
	t.Fatalf("no verdict on %s; got %v", f, rep.Fields())
	return Result{}
}

// auditList wraps audit events into the EventList the audit webhook backend POSTs.
func auditList(items ...string) []byte {
	return []byte(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + strings.Join(items, ",") + `]}`)
}

// scale is the HPA updating the scale subresource of Deployment prod/web.
func scale(id, user string, at time.Time, n int) string {
	return fmt.Sprintf(`{"level":"Request","auditID":%q,"stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/prod/deployments/web/scale",
"verb":"update","user":{"username":%q},"userAgent":"kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/2f1c8a7/system:serviceaccount:kube-system:horizontal-pod-autoscaler",
"objectRef":{"resource":"deployments","namespace":"prod","name":"web","apiGroup":"apps","apiVersion":"v1","subresource":"scale"},
"responseStatus":{"metadata":{},"code":200},
"requestObject":{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"web","namespace":"prod"},"spec":{"replicas":%d}},
"requestReceivedTimestamp":%q,"stageTimestamp":%q}`, id, user, n, at.Format("2006-01-02T15:04:05.000000Z07:00"), at.Format("2006-01-02T15:04:05.000000Z07:00"))
}

// setImage is a person editing the Deployment's image with kubectl edit (an update of the whole
// object), saying why in the parley.dev annotations.
func setImage(id, user string, at time.Time, img, motivation string) string {
	return fmt.Sprintf(`{"level":"Request","auditID":%q,"stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/prod/deployments/web",
"verb":"update","user":{"username":%q},"userAgent":"kubectl/v1.36.0 (linux/amd64) kubernetes/abc",
"objectRef":{"resource":"deployments","namespace":"prod","name":"web","apiGroup":"apps","apiVersion":"v1"},
"responseStatus":{"metadata":{},"code":200},
"requestObject":{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"prod","labels":{"app":"web"},
  "annotations":{"parley.dev/motivation":%q}},
  "spec":{"replicas":8,"template":{"spec":{"containers":[{"name":"web","image":%q}]}}}},
"requestReceivedTimestamp":%q,"stageTimestamp":%q}`, id, user, motivation, img, at.Format("2006-01-02T15:04:05.000000Z07:00"), at.Format("2006-01-02T15:04:05.000000Z07:00"))
}

// trail is a raw CloudTrail record of an API call by principal.
func trail(id, principal, source, name string, at time.Time, params string) []byte {
	return []byte(fmt.Sprintf(`{"eventVersion":"1.09","userIdentity":{"type":"AssumedRole","arn":%q,"accountId":"123456789012"},
"eventTime":%q,"eventSource":%q,"eventName":%q,"awsRegion":"eu-west-1","requestParameters":%s,
"eventID":%q,"readOnly":false,"eventType":"AwsApiCall"}`, principal, at.Format(time.RFC3339), source, name, params, id))
}

func commitTrailers(t *testing.T, e *env, rev string) string {
	t.Helper()
	return e.git.Run("log", "-1", "--format=%(trailers:only,unfold)", rev)
}

func TestStandingOwnerGatesOnceThenWritesNothing(t *testing.T) {
	e := newEnv(t)
	before := e.commits()
	original := e.file(fluxFile)

	rep := e.ingest(events.SourceK8sAudit, auditList(scale("hpa-1", hpaUser, t0, 9)))
	r := only(t, rep, replicas)
	if r.Verdict.Decision != core.DecisionYield || r.Verdict.Rule != "owner.replicas" {
		t.Fatalf("verdict = %s by %s, want a yield to the standing owner", r.Verdict.Decision, r.Verdict.Rule)
	}
	if r.Landed == nil || !r.Landed.Committed || e.commits() != before+1 {
		t.Fatalf("want one gate commit, landed %+v, commits %d -> %d (%s)", r.Landed, before, e.commits(), r.Note)
	}
	gated := e.file(fluxFile)
	for _, want := range []string{"ignore:", "- /spec/replicas", "kind: Deployment", "name: web", "namespace: prod", "parley.dev/gates"} {
		if !strings.Contains(gated, want) {
			t.Errorf("gated Kustomization lacks %q:\n%s", want, gated)
		}
	}
	tr := commitTrailers(t, e, "HEAD")
	for _, want := range []string{"Intent: availability", "Motivation: traffic", "Parley-Field: " + replicas.String(),
		"Parley-Decision: yield", "Parley-Rule: owner.replicas", "Parley-Evidence: k8s-audit hpa-1", "Parley-Winner: hpa <k8s-user:" + hpaUser + ">"} {
		if !strings.Contains(tr, want) {
			t.Errorf("commit trailers (read by git interpret-trailers) lack %q:\n%s", want, tr)
		}
	}

	// The HPA keeps scaling its own field at machine speed: no further commit, one verdict record.
	for i := 2; i <= 40; i++ {
		e.now = t0.Add(time.Duration(i) * 30 * time.Second)
		rep := e.ingest(events.SourceK8sAudit, auditList(scale(fmt.Sprintf("hpa-%d", i), hpaUser, e.now, 9+i%10)))
		if r := only(t, rep, replicas); r.Change != nil {
			t.Fatalf("scale %d planned a change: %+v (%s)", i, r.Change.Action, r.Note)
		}
	}
	if got := e.commits(); got != before+1 {
		t.Fatalf("commits after 40 scales: %d, want %d", got, before+1)
	}
	recs, err := e.state.Verdicts(context.Background(), replicas)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Action != "gate" || recs[0].Commit == "" || len(recs[0].Evidence) != 40 {
		t.Fatalf("verdict records: %d (want 1 carrying the gate commit and 40 events)", len(recs))
	}

	// Redelivering an old batch takes nothing in twice.
	rep = e.ingest(events.SourceK8sAudit, auditList(scale("hpa-1", hpaUser, t0, 9)))
	if rep.Duplicates != 1 || len(rep.Results) != 0 {
		t.Fatalf("redelivery: %d duplicates, %d results", rep.Duplicates, len(rep.Results))
	}
	if original == gated {
		t.Fatal("the gate did not change the Kustomization")
	}
}

func TestExpiringYieldResumesOnTheTimer(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	original := e.file(fluxFile)
	rep := e.ingest(events.SourceK8sAudit, auditList(setImage("edit-1", "alice@parley.example", t0,
		"registry.example.com/shop/web:1.41.4-hotfix", "incident INC-4300 severity=high")))
	r := only(t, rep, image)
	if r.Verdict.Decision != core.DecisionYield || !r.Verdict.Until.Equal(t0.Add(4*time.Hour)) || r.Landed == nil || !r.Landed.Committed {
		t.Fatalf("verdict %s (%s) until %s, landed %+v: %s", r.Verdict.Decision, r.Verdict.Rule, r.Verdict.Until, r.Landed, r.Note)
	}
	if !strings.Contains(e.file(fluxFile), "/spec/template/spec/containers/0/image") {
		t.Fatalf("no gate on the image:\n%s", e.file(fluxFile))
	}
	if tr := commitTrailers(t, e, "HEAD"); !strings.Contains(tr, "Motivation: incident INC-4300 severity=high") || !strings.Contains(tr, "Parley-Until: 2026-11-20T14:00:00Z") {
		t.Fatalf("trailers:\n%s", tr)
	}
	// Only the image's timer; it survives in the state until due.
	timers, _ := e.state.Timers(ctx)
	if len(timers) != 1 || timers[0].Field != image || !timers[0].Due.Equal(t0.Add(4*time.Hour)) {
		t.Fatalf("timers = %+v", timers)
	}
	e.now = t0.Add(4*time.Hour + time.Minute)
	due, err := e.state.Due(ctx, e.now)
	if err != nil || len(due) != 1 {
		t.Fatalf("due = %v, %v", due, err)
	}
	rep, err = e.rec.Recheck(ctx, e.snapshot(), []core.Field{due[0].Field})
	if err != nil {
		t.Fatal(err)
	}
	r = only(t, rep, image)
	if r.Verdict.Decision != core.DecisionEnforceGit || r.Change == nil || r.Change.Action != ActionResume || !r.Landed.Committed {
		t.Fatalf("after expiry: %s, change %+v, %s", r.Verdict.Decision, r.Change, r.Note)
	}
	if got := e.file(fluxFile); got != original {
		t.Fatalf("resume did not give back the Kustomization's bytes:\n%s\nwant:\n%s", got, original)
	}
	// The yield's timer is gone; what is left is the arbiter's own recheck (the peak-sales freeze
	// starts on 27 November and changes what may win).
	if timers, _ := e.state.Timers(ctx); len(timers) != 1 || !timers[0].Due.Equal(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("timers after resume: %+v", timers)
	}
	// Judging again changes nothing.
	rep, _ = e.rec.Recheck(ctx, e.snapshot(), []core.Field{image})
	if r := only(t, rep, image); r.Change != nil {
		t.Fatalf("a second resume planned %+v", r.Change)
	}
}

func TestKafkaAgentAdoptsWithinBoundsAndIsVetoedBeyond(t *testing.T) {
	e := newEnv(t)
	before := e.commits()
	tf := e.file("infra/kafka/main.tf")

	// Over max_size (16): vetoed by the bound Terraform declares; nothing is written.
	rep := e.ingest(events.SourceCloudTrail, trail("ct-1", agentRole, "autoscaling.amazonaws.com", "SetDesiredCapacity", t0,
		`{"autoScalingGroupName":"kafka-consumer","desiredCapacity":24}`))
	r := only(t, rep, capacity)
	if r.Verdict.Decision != core.DecisionVeto || r.Change != nil || e.commits() != before {
		t.Fatalf("24 replicas: %s (%s), change %v", r.Verdict.Decision, r.Verdict.Rule, r.Change)
	}
	// Within bounds: the agent's lasting claim is adopted into the .tf file, one line changed.
	e.now = t0.Add(time.Minute)
	rep = e.ingest(events.SourceCloudTrail, trail("ct-2", agentRole, "autoscaling.amazonaws.com", "SetDesiredCapacity", e.now,
		`{"autoScalingGroupName":"kafka-consumer","desiredCapacity":9}`))
	r = only(t, rep, capacity)
	if r.Verdict.Decision != core.DecisionAdopt || r.Landed == nil || !r.Landed.Committed {
		t.Fatalf("9 replicas: %s (%s): %s", r.Verdict.Decision, r.Verdict.Rule, r.Note)
	}
	after := e.file("infra/kafka/main.tf")
	if want := strings.Replace(tf, "desired_capacity    = 5", "desired_capacity    = 9", 1); after != want {
		t.Fatalf("the .tf edit is not one attribute:\n%s", after)
	}
	if tr := commitTrailers(t, e, "HEAD"); !strings.Contains(tr, "Parley-Decision: adopt") || !strings.Contains(tr, "Intent: performance") ||
		!strings.Contains(tr, "Parley-Evidence: cloudtrail ct-2") {
		t.Fatalf("trailers:\n%s", tr)
	}
	// Git now holds 9 from the adoption; the agent saying 9 again writes nothing.
	e.now = t0.Add(2 * time.Minute)
	rep = e.ingest(events.SourceCloudTrail, trail("ct-3", agentRole, "autoscaling.amazonaws.com", "SetDesiredCapacity", e.now,
		`{"autoScalingGroupName":"kafka-consumer","desiredCapacity":9}`))
	if len(rep.Results) == 1 && rep.Results[0].Change != nil {
		t.Fatalf("restating the adopted value planned %+v", rep.Results[0].Change.Action)
	}
	// The agent retuning the lag alarm loses to Git's reliability claim: recorded, not written.
	rep = e.ingest(events.SourceCloudTrail, trail("ct-4", agentRole, "monitoring.amazonaws.com", "PutMetricAlarm", e.now,
		`{"alarmName":"kafka-consumer-lag","threshold":8000,"evaluationPeriods":5,"metricName":"SumOffsetLag","namespace":"AWS/Kafka","period":60,"statistic":"Maximum","comparisonOperator":"GreaterThanThreshold"}`))
	r = only(t, rep, lagAlarm)
	if r.Verdict.Decision != core.DecisionEnforceGit || r.Change != nil {
		t.Fatalf("alarm: %s (%s) %v", r.Verdict.Decision, r.Verdict.Rule, r.Change)
	}
	if e.commits() != before+1 {
		t.Fatalf("commits: %d, want %d", e.commits(), before+1)
	}
}

func TestOscillationHoldsWithoutACommitStorm(t *testing.T) {
	e := newEnv(t)
	before := e.commits()
	holds := 0
	for i := 0; i < 20; i++ {
		e.now = t0.Add(time.Duration(i) * 2 * time.Minute)
		who, n := agentRole, 12
		if i%2 == 1 {
			who, n = oncallARN, 7
		}
		rep := e.ingest(events.SourceCloudTrail, trail(fmt.Sprintf("flip-%d", i), who, "autoscaling.amazonaws.com", "SetDesiredCapacity", e.now,
			fmt.Sprintf(`{"autoScalingGroupName":"kafka-consumer","desiredCapacity":%d}`, n)))
		if only(t, rep, capacity).Verdict.Decision == core.DecisionHold {
			holds++
		}
	}
	if holds == 0 {
		t.Fatal("twenty flips between two actors never held the field")
	}
	recs, _ := e.state.Verdicts(context.Background(), capacity)
	var holdRecords int
	for _, r := range recs {
		if r.Verdict.Decision == core.DecisionHold {
			holdRecords++
		}
	}
	if holdRecords != 1 {
		t.Fatalf("hold records: %d, want one", holdRecords)
	}
	// Before the hold the winner's value may be adopted; once held, nothing is written.
	if n := e.commits() - before; n > 2 {
		t.Fatalf("%d commits for 20 flips: a commit storm", n)
	}
	t.Logf("20 flips: %d commits, %d verdict records, held on %d", e.commits()-before, len(recs), holds)
}

// A hold is put to people once, on the field's pull request: an empty commit (the field is left as
// it is) and the policy's escalation list asked in its body. Later flips restate the hold without
// asking again; when the hold ends, the pull request is told how and, changing no file, closed.
func TestOscillationHoldIsPutToPeopleOnAPullRequest(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	// The writer pushes to a remote; the checkout the snapshots read follows its main branch.
	remote := filepath.Join(t.TempDir(), "remote.git")
	e.git.Run("clone", "-q", "--bare", e.dir, remote)
	follow := func() { e.git.Run("fetch", "-q", remote, "main"); e.git.Run("reset", "-q", "--hard", "FETCH_HEAD") }
	prs := &recordedPRs{}
	e.rec.Writer = &GitWriter{URL: remote, Base: "main", Mode: ModeDirect, PRs: prs, Author: object.Signature{Name: "Parley", Email: "p@x"},
		Now: func() time.Time { return e.now }}
	var held *Result
	for i := 0; i < 12; i++ {
		follow()
		e.now = t0.Add(time.Duration(i) * 2 * time.Minute)
		who, n := agentRole, 12
		if i%2 == 1 {
			who, n = oncallARN, 7
		}
		rep := e.ingest(events.SourceCloudTrail, trail(fmt.Sprintf("flip-%d", i), who, "autoscaling.amazonaws.com", "SetDesiredCapacity", e.now,
			fmt.Sprintf(`{"autoScalingGroupName":"kafka-consumer","desiredCapacity":%d}`, n)))
		if r := only(t, rep, capacity); r.Verdict.Decision == core.DecisionHold && held == nil {
			held = &r
		}
	}
	if held == nil || held.Landed == nil || held.Landed.PR != 1 {
		t.Fatalf("the hold was not put on a pull request: %+v", held)
	}
	branch := branchFor(capacity)
	if len(prs.opened) != 1 || prs.opened[0] != branch || len(prs.comments[1]) != 1 {
		t.Fatalf("pull requests %v, comments %v: want one, asked once", prs.opened, prs.comments)
	}
	body := prs.comments[1][0]
	for _, want := range []string{"@parleyhq/sre: you are asked to decide", "flipped the value", "Parley writes nothing for this field until"} {
		if !strings.Contains(body, want) {
			t.Fatalf("the pull request does not say %q:\n%s", want, body)
		}
	}
	rg := gittest.New(t, remote)
	if files := rg.Run("diff", "--name-only", "main", branch); files != "" {
		t.Fatalf("the question changed files: %s", files)
	}
	if log := rg.Run("log", "--format=%s%n%(trailers:key=Parley-Decision,valueonly)", "main.."+branch); !strings.HasPrefix(log, "parley: hold desired_capacity of aws_autoscaling_group.consumer: people decide\nhold") {
		t.Fatalf("the branch: %s", log)
	}
	last, _, _ := e.state.Last(ctx, capacity)
	if last.Verdict.Decision != core.DecisionHold || last.Action != string(ActionAsk) || last.PR != 1 {
		t.Fatalf("the recorded hold: %+v", last)
	}

	// The hold ends: the field is judged again, and its pull request is told and closed.
	follow()
	e.now = last.Verdict.Until.Add(time.Minute)
	rep, err := e.rec.Recheck(ctx, e.snapshot(), []core.Field{capacity})
	if err != nil {
		t.Fatal(err)
	}
	if d := only(t, rep, capacity).Verdict.Decision; d == core.DecisionHold {
		t.Fatalf("still held after the hold: %s", d)
	}
	if len(prs.closed) != 1 || prs.closed[0] != 1 || !strings.Contains(prs.comments[1][1], "The hold on "+capacity.String()+" is over") {
		t.Fatalf("closed %v, comments %q", prs.closed, prs.comments[1])
	}
}

func TestFluxRevertEndsLosingClaims(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	// A developer edits the image without saying why: Git's critical CVE fix wins.
	rep := e.ingest(events.SourceK8sAudit, auditList(setImage("edit-2", "bob@parley.example", t0,
		"registry.example.com/shop/web:1.40.0", "maintenance")))
	if r := only(t, rep, image); r.Verdict.Decision != core.DecisionEnforceGit || r.Change != nil {
		t.Fatalf("verdict %s (%s), change %v", r.Verdict.Decision, r.Verdict.Rule, r.Change)
	}
	if st, _ := e.state.Standing(ctx, image); len(st) != 1 {
		t.Fatalf("standing claims: %d", len(st))
	}
	flux := fmt.Sprintf(`{"involvedObject":{"kind":"Kustomization","namespace":"flux-system","name":"apps","uid":"u-1","apiVersion":"kustomize.toolkit.fluxcd.io/v1"},
"severity":"info","timestamp":%q,"message":"Deployment/prod/web configured\n","reason":"Progressing",
"metadata":{"revision":"main@sha1:0a1b2c"},"reportingController":"kustomize-controller","reportingInstance":"kustomize-controller-1"}`,
		t0.Add(time.Minute).Format(time.RFC3339))
	rep = e.ingest(events.SourceFlux, []byte(flux))
	if len(rep.Reverts) != 1 {
		t.Fatalf("reverts %d", len(rep.Reverts))
	}
	if st, _ := e.state.Standing(ctx, image); len(st) != 0 {
		t.Fatalf("the reverted claim still stands: %v", st)
	}
}

func TestSnapshotCacheReadsTheBranchOncePerCommit(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	var c SnapshotCache
	load := func() Snapshot {
		t.Helper()
		s, err := c.Load(ctx, e.dir, "main", ".parley/policy.hcl", e.led, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	same := func(a, b map[string][]byte) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }
	a, b := load(), load()
	if !same(a.Files, b.Files) || a.Policy != b.Policy || a.inventory() != b.inventory() {
		t.Fatal("the same commit was read and parsed twice")
	}
	// A commit moves the branch: the next load reads it.
	e.rec.Writer = &LocalWriter{Dir: e.dir, Author: object.Signature{Name: "P", Email: "p@x"}}
	e.ingest(events.SourceK8sAudit, auditList(scale("hpa-1", hpaUser, t0, 9)))
	c2 := load()
	if same(a.Files, c2.Files) || c2.Head == a.Head || !strings.Contains(string(c2.Files[fluxFile]), "/spec/replicas") {
		t.Fatal("a moved branch was served from the cache")
	}
	// A policy given by the caller is used, and does not replace the branch's in the cache.
	pol := a.Policy
	s, err := c.Load(ctx, e.dir, "main", ".parley/policy.hcl", e.led, pol)
	if err != nil || s.Policy != pol {
		t.Fatalf("explicit policy: %v", err)
	}
	if again := load(); again.Policy != c2.Policy {
		t.Fatal("an explicit policy replaced the cached one")
	}
	// A nil cache caches nothing.
	var none *SnapshotCache
	x, _ := none.Load(ctx, e.dir, "main", ".parley/policy.hcl", e.led, nil)
	y, _ := none.Load(ctx, e.dir, "main", ".parley/policy.hcl", e.led, nil)
	if same(x.Files, y.Files) {
		t.Fatal("a nil cache cached")
	}
}

// The drift loop reads a branch within its file budget (parley serve's max_file_size): a file
// above it is left out of the snapshot rather than read and parsed.
func TestSnapshotCacheReadsWithinItsFileBudget(t *testing.T) {
	e := newEnv(t)
	size := int64(len(e.file(fluxFile)))
	all, err := LoadSnapshot(context.Background(), e.dir, "main", ".parley/policy.hcl", e.led, nil)
	if err != nil {
		t.Fatal(err)
	}
	for budget, kept := range map[int64]bool{size - 1: false, 0: true} {
		c := SnapshotCache{FileBudget: budget}
		// The policy is given: the budget may leave out the branch's own too.
		s, err := c.Load(context.Background(), e.dir, "main", ".parley/policy.hcl", e.led, all.Policy)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.Files[fluxFile]; ok != kept {
			t.Errorf("budget %d: %s (%d bytes) read %v, want %v", budget, fluxFile, size, ok, kept)
		}
	}
}

func TestTimerForNeverFallsDue(t *testing.T) {
	v := core.Verdict{Field: image, Decision: core.DecisionYield, Rule: "r", Until: t0.Add(time.Hour), Recheck: t0.Add(2 * time.Hour)}
	if tm := timerFor(v, t0); !tm.Due.Equal(t0.Add(time.Hour)) {
		t.Errorf("the earlier of until and recheck: %v", tm.Due)
	}
	v.Until, v.Recheck = time.Time{}, t0.Add(-time.Second)
	if tm := timerFor(v, t0); !tm.Due.Equal(t0.Add(time.Minute)) {
		t.Errorf("a recheck in the past must be put ahead, got %v", tm.Due)
	}
	v.Recheck = time.Time{}
	if tm := timerFor(v, t0); !tm.Due.IsZero() || tm.Field != image {
		t.Errorf("no time: the timer is cleared, got %+v", tm)
	}
}

// On-call scaling the consumer group by hand during an incident wins for the incident's lifetime:
// the attribute is gated in Terraform's own way, lifecycle ignore_changes in the resource, and the
// resume when the claim ends gives back the file's bytes.
func TestTerraformYieldGatesWithIgnoreChanges(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	// In this repository on-call's live changes are incident responses (a policy change in Git).
	pol := e.file(".parley/policy.hcl")
	pol = strings.Replace(pol, `aws_principals = ["arn:aws:sts::*:assumed-role/oncall/*"]`,
		`aws_principals = ["arn:aws:sts::*:assumed-role/oncall/*"]
  motivation     = "incident"`, 1)
	if err := os.WriteFile(filepath.Join(e.dir, ".parley/policy.hcl"), []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	e.git.Run("commit", "--quiet", "-am", "policy: on-call acts on incidents")
	tf := e.file("infra/kafka/main.tf")
	rep := e.ingest(events.SourceCloudTrail, trail("ct-oncall-1", oncallARN, "autoscaling.amazonaws.com", "SetDesiredCapacity", t0,
		`{"autoScalingGroupName":"kafka-consumer","desiredCapacity":12}`))
	r := only(t, rep, capacity)
	if r.Verdict.Decision != core.DecisionYield || r.Change == nil || r.Change.Action != ActionGate || r.Landed == nil || !r.Landed.Committed {
		t.Fatalf("on-call's 12: %s (%s), change %v: %s", r.Verdict.Decision, r.Verdict.Rule, r.Change != nil, r.Note)
	}
	gated := e.file("infra/kafka/main.tf")
	if !strings.Contains(gated, "  lifecycle {\n    # parley.dev/gates: ") || !strings.Contains(gated, "    ignore_changes = [desired_capacity]\n  }\n}\n") {
		t.Fatalf("no ignore_changes gate:\n%s", gated)
	}
	if tr := commitTrailers(t, e, "HEAD"); !strings.Contains(tr, "Parley-Decision: yield") || !strings.Contains(tr, "Parley-Evidence: cloudtrail ct-oncall-1") {
		t.Fatalf("trailers:\n%s", tr)
	}
	snap := e.snapshot()
	if fs := GatedFields(snap.Files); len(fs) != 1 || fs[0] != capacity {
		t.Fatalf("gated fields %v", fs)
	}
	// Judged again: the gate is there, nothing more is written.
	rep, err := e.rec.Recheck(ctx, snap, []core.Field{capacity})
	if err != nil {
		t.Fatal(err)
	}
	if r := only(t, rep, capacity); r.Change != nil {
		t.Fatalf("a second gate was planned: %+v", r.Change.Action)
	}
	// The incident claim ends: Git's value stands again and the gate is removed, exactly.
	e.now = r.Verdict.Until.Add(time.Minute)
	rep, err = e.rec.Recheck(ctx, e.snapshot(), []core.Field{capacity})
	if err != nil {
		t.Fatal(err)
	}
	r = only(t, rep, capacity)
	if r.Verdict.Decision != core.DecisionEnforceGit || r.Change == nil || r.Change.Action != ActionResume || !r.Landed.Committed {
		t.Fatalf("after the claim ended: %s (%s), change %v: %s", r.Verdict.Decision, r.Verdict.Rule, r.Change != nil, r.Note)
	}
	if got := e.file("infra/kafka/main.tf"); got != tf {
		t.Fatalf("resume did not give back the .tf file's bytes:\n%s\nwant:\n%s", got, tf)
	}
}

// commitFiles writes files into the demo repository and commits them.
func commitFiles(t *testing.T, e *env, files map[string]string, msg string) {
	t.Helper()
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(e.dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.git.Run("add", "-A")
	e.git.Run("commit", "--quiet", "-m", msg)
}

// addShopChart commits a chart in the repository and a Flux HelmRelease installing it into prod:
// the release's Deployment is named by the chart (shop-api), not by any manifest in Git.
func addShopChart(t *testing.T, e *env, driftDetection string) {
	t.Helper()
	files := map[string]string{
		"charts/shop/Chart.yaml":             "apiVersion: v2\nname: shop\nversion: 1.2.0\n",
		"charts/shop/values.yaml":            "replicaCount: 2\nimage: registry.example.com/shop/api:2.0.0\n",
		"charts/shop/templates/_helpers.tpl": "{{- define \"shop.name\" -}}{{ .Chart.Name }}-api{{- end }}\n",
		"charts/shop/templates/NOTES.txt":    "shop {{ .Release.Name }} installed\n",
		"charts/shop/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "shop.name" . }}
  labels:
    app.kubernetes.io/instance: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicaCount }}
  template:
    spec:
      containers:
        - name: api
          image: {{ .Values.image }}
`,
		"clusters/prod/shop.yaml": `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: shop
  namespace: flux-system
spec:
  interval: 10m
  targetNamespace: prod
  chart:
    spec:
      chart: ./charts/shop
      sourceRef:
        kind: GitRepository
        name: flux-system
` + driftDetection + `  values:
    replicaCount: 4
`,
	}
	commitFiles(t, e, files, "Install the shop chart")
}

// A Deployment that only a chart in the repository defines: the HPA scales it, the verdict yields,
// and the gate goes where helm-controller reads it, spec.driftDetection.ignore of the HelmRelease
// that installs it; the resume gives back the HelmRelease's bytes.
func TestHelmReleaseObjectGatesInDriftDetection(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	addShopChart(t, e, "  driftDetection:\n    mode: enabled\n")
	shopReplicas := core.K8sField("apps", "Deployment", "prod", "shop-api", "/spec/replicas")
	inv := e.snapshot().inventory()
	pl, ok := inv.Locate(shopReplicas)
	if !ok || pl.Manifest != "charts/shop/templates/deployment.yaml" || pl.Chart != "charts/shop" || len(pl.Managers) != 1 ||
		pl.Managers[0].Target != (gitops.Target{Kind: "HelmRelease", Name: "shop", Namespace: "flux-system"}) {
		t.Fatalf("placement of the chart's Deployment: %+v, %v", pl, ok)
	}
	original := e.file("clusters/prod/shop.yaml")
	scaleShop := strings.ReplaceAll(scale("hpa-shop-1", hpaUser, t0, 9), "deployments/web/scale", "deployments/shop-api/scale")
	scaleShop = strings.ReplaceAll(scaleShop, `"name":"web"`, `"name":"shop-api"`)
	rep := e.ingest(events.SourceK8sAudit, auditList(scaleShop))
	r := only(t, rep, shopReplicas)
	if r.Verdict.Decision != core.DecisionYield || r.Change == nil || r.Change.Action != ActionGate || r.Landed == nil || !r.Landed.Committed {
		t.Fatalf("HPA on the chart's Deployment: %s (%s), change %v: %s", r.Verdict.Decision, r.Verdict.Rule, r.Change != nil, r.Note)
	}
	gated := e.file("clusters/prod/shop.yaml")
	for _, want := range []string{"    mode: enabled\n    ignore:\n", "- /spec/replicas", "name: shop-api", "namespace: prod", "parley.dev/gates:"} {
		if !strings.Contains(gated, want) {
			t.Fatalf("the HelmRelease lacks %q:\n%s", want, gated)
		}
	}
	if fs := GatedFields(e.snapshot().Files); len(fs) != 1 || fs[0] != shopReplicas {
		t.Fatalf("gated fields %v", fs)
	}
	// The HPA's claim ends (traffic claims last an hour): the gate is removed, exactly.
	e.now = r.Verdict.Until.Add(time.Minute)
	rep, err := e.rec.Recheck(ctx, e.snapshot(), []core.Field{shopReplicas})
	if err != nil {
		t.Fatal(err)
	}
	if r := only(t, rep, shopReplicas); r.Change == nil || r.Change.Action != ActionResume || !r.Landed.Committed {
		t.Fatalf("after the claim ended: %s (%s), change %v: %s", r.Verdict.Decision, r.Verdict.Rule, r.Change != nil, r.Note)
	}
	if got := e.file("clusters/prod/shop.yaml"); got != original {
		t.Fatalf("resume did not give back the HelmRelease's bytes:\n%s\nwant:\n%s", got, original)
	}
}

// A staging overlay renames the prod Deployment (namePrefix) into its own namespace: the HPA
// scaling staging/staging-web is gated in the staging Kustomization under the name the cluster
// knows, and the resume gives back its bytes.
func TestOverlayObjectGatesUnderItsBuiltName(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	files := map[string]string{
		"k8s/staging/kustomization.yaml": "namePrefix: staging-\nnamespace: staging\nresources:\n  - ../prod/web.yaml\n",
		"clusters/staging/apps.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: staging\n  namespace: flux-system\n" +
			"spec:\n  interval: 10m\n  path: ./k8s/staging\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
	}
	commitFiles(t, e, files, "Add a staging overlay")
	staging := core.K8sField("apps", "Deployment", "staging", "staging-web", "/spec/replicas")
	pl, ok := e.snapshot().inventory().Locate(staging)
	if !ok || pl.Manifest != "k8s/prod/web.yaml" || pl.Built != "k8s/staging" || len(pl.Managers) != 1 || pl.Managers[0].Target.Name != "staging" {
		t.Fatalf("placement of the staging Deployment: %+v, %v", pl, ok)
	}
	original, prod := e.file("clusters/staging/apps.yaml"), e.file("clusters/prod/apps.yaml")
	ev := strings.ReplaceAll(scale("hpa-stg-1", hpaUser, t0, 5), "namespaces/prod/deployments/web/scale", "namespaces/staging/deployments/staging-web/scale")
	ev = strings.ReplaceAll(ev, `"namespace":"prod","name":"web"`, `"namespace":"staging","name":"staging-web"`)
	rep := e.ingest(events.SourceK8sAudit, auditList(ev))
	r := only(t, rep, staging)
	if r.Verdict.Decision != core.DecisionYield || r.Change == nil || r.Change.Action != ActionGate || r.Landed == nil || !r.Landed.Committed {
		t.Fatalf("HPA on staging-web: %s (%s), change %v: %s", r.Verdict.Decision, r.Verdict.Rule, r.Change != nil, r.Note)
	}
	gated := e.file("clusters/staging/apps.yaml")
	for _, want := range []string{"ignore:", "- /spec/replicas", "name: staging-web", "namespace: staging"} {
		if !strings.Contains(gated, want) {
			t.Fatalf("the staging Kustomization lacks %q:\n%s", want, gated)
		}
	}
	if e.file("clusters/prod/apps.yaml") != prod {
		t.Fatal("the prod Kustomization changed")
	}
	e.now = r.Verdict.Until.Add(time.Minute)
	rep, err := e.rec.Recheck(ctx, e.snapshot(), []core.Field{staging})
	if err != nil {
		t.Fatal(err)
	}
	if r := only(t, rep, staging); r.Change == nil || r.Change.Action != ActionResume || !r.Landed.Committed {
		t.Fatalf("after the claim ended: %s (%s), change %v: %s", r.Verdict.Decision, r.Verdict.Rule, r.Change != nil, r.Note)
	}
	if got := e.file("clusters/staging/apps.yaml"); got != original {
		t.Fatalf("resume did not give back the Kustomization's bytes:\n%s\nwant:\n%s", got, original)
	}
}

// On-call's lasting change to the image of a Deployment a chart renders is adopted at the source:
// into the HelmRelease's values, at the key that renders the image, found by rendering.
func TestHelmReleaseObjectAdoptsIntoValues(t *testing.T) {
	e := newEnv(t)
	addShopChart(t, e, "")
	image := core.K8sField("apps", "Deployment", "prod", "shop-api", "/spec/template/spec/containers/0/image")
	ev := setImage("edit-shop-1", "alice@parley.example", t0, "registry.example.com/shop/api:2.0.1", "")
	for _, r := range [][2]string{
		{"deployments/web", "deployments/shop-api"}, {`"name":"web","namespace":"prod"`, `"name":"shop-api","namespace":"prod"`},
		{`"namespace":"prod","name":"web"`, `"namespace":"prod","name":"shop-api"`},
		{`"replicas":8`, `"replicas":4`}, {`{"name":"web","image"`, `{"name":"api","image"`},
	} {
		ev = strings.ReplaceAll(ev, r[0], r[1])
	}
	rep := e.ingest(events.SourceK8sAudit, auditList(ev))
	r := only(t, rep, image)
	if r.Verdict.Decision != core.DecisionAdopt || r.Change == nil || r.Change.Action != ActionAdopt || r.Landed == nil || !r.Landed.Committed {
		t.Fatalf("on-call's image: %s (%s), change %v: %s", r.Verdict.Decision, r.Verdict.Rule, r.Change != nil, r.Note)
	}
	if got := e.file("clusters/prod/shop.yaml"); !strings.Contains(got, "  values:\n    replicaCount: 4\n    image: registry.example.com/shop/api:2.0.1\n") {
		t.Fatalf("the HelmRelease's values:\n%s", got)
	}
	if got := e.file("charts/shop/values.yaml"); !strings.Contains(got, "image: registry.example.com/shop/api:2.0.0") {
		t.Fatalf("the chart's own values changed:\n%s", got)
	}
	// Git now renders the adopted image: the same change again writes nothing.
	if v, ok := e.snapshot().inventory().RenderedValue(image); !ok || v.JSON() != `"registry.example.com/shop/api:2.0.1"` {
		t.Fatalf("rendered image after adoption: %s %v", v, ok)
	}
}

// A kustomization whose generator reads a script builds from a snapshot: the snapshot loads the
// files generators read besides the manifests, and the ConfigMap gets its hashed name.
func TestSnapshotLoadsGeneratorInputs(t *testing.T) {
	e := newEnv(t)
	commitFiles(t, e, map[string]string{
		"k8s/jobs/kustomization.yaml": "namespace: prod\nconfigMapGenerator:\n  - name: scripts\n    files:\n      - refresh.sh=./scripts/refresh.sh\n    envs: [settings.env]\n",
		"k8s/jobs/scripts/refresh.sh": "#!/bin/sh\necho refresh\n",
		"k8s/jobs/settings.env":       "LOG_LEVEL=debug\n",
		"clusters/prod/jobs.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: jobs\n  namespace: flux-system\n" +
			"spec:\n  path: ./k8s/jobs\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
	}, "Add the jobs' scripts")
	files, _, err := ReadFiles(e.dir, "main")
	if err != nil {
		t.Fatal(err)
	}
	if string(files["k8s/jobs/scripts/refresh.sh"]) != "#!/bin/sh\necho refresh\n" || files["k8s/jobs/settings.env"] == nil {
		t.Fatalf("the generator's inputs were not loaded: %v", len(files))
	}
	inv, problems := gitops.Discover(files)
	for _, p := range problems {
		if strings.Contains(p.Error(), "k8s/jobs") {
			t.Fatalf("problem: %v", p)
		}
	}
	found := false
	for _, m := range inv.Managers() {
		found = found || m.Target.Name == "jobs"
	}
	if !found {
		t.Fatal("no jobs Kustomization")
	}
	if got := gitops.GeneratorInputs("k8s/jobs/kustomization.yaml", files["k8s/jobs/kustomization.yaml"]); strings.Join(got, ",") != "k8s/jobs/scripts/refresh.sh,k8s/jobs/settings.env" {
		t.Fatalf("GeneratorInputs = %v", got)
	}
}

// When several keys of a release's values render the adopted value, Parley does not guess: it keeps
// the live value under a gate and asks, in a change that goes through a pull request, which key
// is meant.
func TestAdoptionWithoutASingleKeyAsksWhereTheValueGoes(t *testing.T) {
	e := newEnv(t)
	addShopChart(t, e, "")
	commitFiles(t, e, map[string]string{
		"charts/shop/values.yaml": "replicaCount: 2\nimage: registry.example.com/shop/api:2.0.0\nimageOverride: \"\"\n",
		"charts/shop/templates/deployment.yaml": strings.Replace(e.file("charts/shop/templates/deployment.yaml"),
			"image: {{ .Values.image }}", "image: {{ coalesce .Values.imageOverride .Values.image }}", 1),
	}, "Let an override win over the image")
	image := core.K8sField("apps", "Deployment", "prod", "shop-api", "/spec/template/spec/containers/0/image")
	ev := setImage("edit-shop-2", "alice@parley.example", t0, "registry.example.com/shop/api:2.0.1", "")
	for _, r := range [][2]string{
		{"deployments/web", "deployments/shop-api"}, {`"name":"web","namespace":"prod"`, `"name":"shop-api","namespace":"prod"`},
		{`"namespace":"prod","name":"web"`, `"namespace":"prod","name":"shop-api"`},
		{`"replicas":8`, `"replicas":4`}, {`{"name":"web","image"`, `{"name":"api","image"`},
	} {
		ev = strings.ReplaceAll(ev, r[0], r[1])
	}
	rep := e.ingest(events.SourceK8sAudit, auditList(ev))
	r := only(t, rep, image)
	if r.Verdict.Decision != core.DecisionAdopt || r.Change == nil || !r.Change.Ask || r.Change.Action != ActionGate {
		t.Fatalf("on-call's image: %s (%s), change %+v: %s", r.Verdict.Decision, r.Verdict.Rule, r.Change, r.Note)
	}
	if want := `parley: where should /spec/template/spec/containers/0/image of Deployment prod/shop-api = "registry.example.com/shop/api:2.0.1" go?`; r.Change.Title != want ||
		!strings.HasPrefix(r.Change.Message, want+"\n\n") {
		t.Fatalf("title %q, message:\n%s", r.Change.Title, r.Change.Message)
	}
	for _, want := range []string{"Several keys of the values of HelmRelease flux-system/shop", "image, imageOverride", "Parley does not guess",
		"this gate keeps the live value"} {
		if !strings.Contains(shown(t, r.Change.Body), want) {
			t.Errorf("the body lacks %q:\n%s", want, r.Change.Body)
		}
	}
	hr := e.file("clusters/prod/shop.yaml")
	if !strings.Contains(hr, "- /spec/template/spec/containers/0/image") || strings.Contains(hr, "2.0.1") {
		t.Fatalf("the HelmRelease must gate the image and not guess its value:\n%s", hr)
	}
	// A person answers: the override gets the image. Judged again, the adoption is done and the
	// gate that kept the live value goes.
	commitFiles(t, e, map[string]string{
		"charts/shop/values.yaml": "replicaCount: 2\nimage: registry.example.com/shop/api:2.0.0\nimageOverride: registry.example.com/shop/api:2.0.1\n",
	}, "The override carries the hotfix")
	rep, err := e.rec.Recheck(context.Background(), e.snapshot(), []core.Field{image})
	if err != nil {
		t.Fatal(err)
	}
	if r := only(t, rep, image); r.Change == nil || r.Change.Ask || r.Landed == nil || !r.Landed.Committed {
		t.Fatalf("after the answer: %s, change %+v: %s", r.Verdict.Decision, r.Change, r.Note)
	}
	if hr := e.file("clusters/prod/shop.yaml"); strings.Contains(hr, "containers/0/image") {
		t.Fatalf("the gate stayed after Git took the value:\n%s", hr)
	}
}

// A question goes through a pull request even when the writer pushes straight to the base branch.
func TestGitWriterSendsAQuestionThroughAPullRequest(t *testing.T) {
	e := newEnv(t)
	bare := filepath.Join(t.TempDir(), "remote.git")
	if out, err := exec.Command("git", "clone", "-q", "--bare", e.dir, bare).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	prs := &recordedPRs{}
	w := &GitWriter{URL: bare, Base: "main", Mode: ModeDirect, PRs: prs, Author: object.Signature{Name: "Parley", Email: "p@x"}}
	edit := func(files gitwrite.Files) (map[string][]byte, error) {
		return map[string][]byte{"QUESTION.md": []byte("where?\n")}, nil
	}
	c := Change{Field: core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas"), Action: ActionGate, Edit: edit,
		Message: "parley: where should it go?\n\nbody\n", Title: "parley: where should it go?", Body: "body", Branch: "parley/ask", Ask: true}
	l, err := w.Write(context.Background(), c)
	if err != nil || !l.Committed || l.Branch != "parley/ask" || l.PR != 1 || len(prs.opened) != 1 || prs.opened[0] != "parley/ask" {
		t.Fatalf("landed %+v, %v, pull requests %v", l, err, prs.opened)
	}
	main, _ := exec.Command("git", "-C", bare, "rev-parse", "main").Output()
	head, _ := exec.Command("git", "-C", e.dir, "rev-parse", "main").Output()
	if string(main) != string(head) {
		t.Fatal("a question was pushed to the base branch")
	}
	c.Ask, c.Branch = false, "parley/other"
	if l, err := w.Write(context.Background(), c); err != nil || l.Branch != "main" || len(prs.opened) != 1 {
		t.Fatalf("a plain change in direct mode: %+v %v %v", l, err, prs.opened)
	}
}

// recordedPRs is a pull request opener that remembers what it was asked: pull requests by head
// branch, numbered from 1 in opening order.
type recordedPRs struct {
	opened   []string
	open     map[string]int
	comments map[int][]string
	closed   []int
}

func (r *recordedPRs) Ensure(_ context.Context, head, _, _, body string) (int, bool, error) {
	if n, ok := r.open[head]; ok {
		return n, false, nil
	}
	if r.open == nil {
		r.open, r.comments = map[string]int{}, map[int][]string{}
	}
	r.opened = append(r.opened, head)
	n := len(r.opened)
	r.open[head] = n
	r.comments[n] = append(r.comments[n], body)
	return n, true, nil
}

func (r *recordedPRs) Comment(_ context.Context, head, _, body string) (int, error) {
	n, ok := r.open[head]
	if !ok {
		return 0, nil
	}
	r.comments[n] = append(r.comments[n], body)
	return n, nil
}

func (r *recordedPRs) Close(ctx context.Context, head, base, comment string) (int, error) {
	n, err := r.Comment(ctx, head, base, comment)
	if n != 0 {
		delete(r.open, head)
		r.closed = append(r.closed, n)
	}
	return n, err
}

// On-call's lasting image change to a Deployment a staging overlay builds from the prod manifest is
// adopted into the overlay, as its own patch: the prod manifest, which the prod build shares, is
// not touched.
func TestOverlayObjectAdoptsIntoAnOverlayPatch(t *testing.T) {
	e := newEnv(t)
	commitFiles(t, e, map[string]string{
		"k8s/staging/kustomization.yaml": "namePrefix: staging-\nnamespace: staging\nresources:\n  - ../prod/web.yaml\n",
		"clusters/staging/apps.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: staging\n  namespace: flux-system\n" +
			"spec:\n  interval: 10m\n  path: ./k8s/staging\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
	}, "Add a staging overlay")
	prod := e.file("k8s/prod/web.yaml")
	image := core.K8sField("apps", "Deployment", "staging", "staging-web", "/spec/template/spec/containers/0/image")
	ev := setImage("edit-stg-1", "alice@parley.example", t0, "registry.example.com/web:2.0.1", "")
	ev = strings.ReplaceAll(ev, "namespaces/prod/deployments/web", "namespaces/staging/deployments/staging-web")
	ev = strings.ReplaceAll(ev, `"namespace":"prod","name":"web"`, `"namespace":"staging","name":"staging-web"`)
	ev = strings.ReplaceAll(ev, `"name":"web","namespace":"prod"`, `"name":"staging-web","namespace":"staging"`)
	rep := e.ingest(events.SourceK8sAudit, auditList(ev))
	r := only(t, rep, image)
	if r.Verdict.Decision != core.DecisionAdopt || r.Change == nil || r.Change.Action != ActionAdopt || r.Landed == nil || !r.Landed.Committed {
		t.Fatalf("on-call's image: %s (%s), change %+v: %s", r.Verdict.Decision, r.Verdict.Rule, r.Change, r.Note)
	}
	if strings.Join(r.Change.Files, ",") != "k8s/staging/kustomization.yaml" || !strings.Contains(r.Change.Body, "written as a patch of the overlay k8s/staging") {
		t.Fatalf("files %v, body:\n%s", r.Change.Files, r.Change.Body)
	}
	if e.file("k8s/prod/web.yaml") != prod {
		t.Fatal("the shared prod manifest changed")
	}
	kust := e.file("k8s/staging/kustomization.yaml")
	for _, want := range []string{"patches:", "path: /spec/template/spec/containers/0/image", "value: registry.example.com/web:2.0.1", "name: web"} {
		if !strings.Contains(kust, want) {
			t.Fatalf("the overlay lacks %q:\n%s", want, kust)
		}
	}
	// The overlay now builds the adopted image: Git's claim on the field is the live value.
	pl, ok := e.snapshot().inventory().Locate(image)
	if !ok || pl.Built != "k8s/staging" {
		t.Fatalf("placement after adoption: %+v %v", pl, ok)
	}
	files, _, err := ReadFiles(e.dir, "main")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := gitops.AdoptOverlayPatch(context.Background(), nil, files, "k8s/staging", image, core.StringValue("registry.example.com/web:2.0.1")); err != nil || len(again) != 0 {
		t.Fatalf("the overlay does not build the adopted image: %v %v", again, err)
	}
}

// For an Argo CD Helm source the adopted value goes where the release's values set it: here the
// environment's values file the Application lists, not the chart's values.yaml every release shares.
func TestArgoHelmObjectAdoptsIntoItsValuesFile(t *testing.T) {
	e := newEnv(t)
	commitFiles(t, e, map[string]string{
		"charts/api/Chart.yaml":       "apiVersion: v2\nname: api\nversion: 0.3.0\n",
		"charts/api/values.yaml":      "image: registry.example.com/api:1.0.0\n",
		"charts/api/values-prod.yaml": "# prod\nimage: registry.example.com/api:1.1.0 # pinned by release\n",
		"charts/api/templates/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n" +
			"spec:\n  template:\n    spec:\n      containers:\n        - name: api\n          image: {{ .Values.image }}\n",
		"argocd/api.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: api\n  namespace: argocd\n" +
			"spec:\n  project: default\n  source:\n    repoURL: https://github.com/acme/infra.git\n    path: charts/api\n    helm:\n      valueFiles: [values-prod.yaml]\n" +
			"  destination:\n    namespace: prod\n",
	}, "Install the api chart with Argo CD")
	image := core.K8sField("apps", "Deployment", "prod", "api", "/spec/template/spec/containers/0/image")
	ev := setImage("edit-api-1", "alice@parley.example", t0, "registry.example.com/api:1.2.0", "")
	for _, r := range [][2]string{
		{"deployments/web", "deployments/api"}, {`"name":"web","namespace":"prod"`, `"name":"api","namespace":"prod"`},
		{`"namespace":"prod","name":"web"`, `"namespace":"prod","name":"api"`}, {`"replicas":8,`, ``}, {`{"name":"web","image"`, `{"name":"api","image"`},
	} {
		ev = strings.ReplaceAll(ev, r[0], r[1])
	}
	rep := e.ingest(events.SourceK8sAudit, auditList(ev))
	r := only(t, rep, image)
	if r.Verdict.Decision != core.DecisionAdopt || r.Change == nil || r.Change.Action != ActionAdopt || r.Landed == nil || !r.Landed.Committed {
		t.Fatalf("on-call's image: %s (%s), change %+v: %s", r.Verdict.Decision, r.Verdict.Rule, r.Change, r.Note)
	}
	if got := e.file("charts/api/values-prod.yaml"); got != "# prod\nimage: registry.example.com/api:1.2.0 # pinned by release\n" {
		t.Fatalf("values-prod.yaml:\n%s", got)
	}
	if got := e.file("charts/api/values.yaml"); got != "image: registry.example.com/api:1.0.0\n" {
		t.Fatalf("the chart's shared values changed:\n%s", got)
	}
	if v, ok := e.snapshot().inventory().RenderedValue(image); !ok || v.JSON() != `"registry.example.com/api:1.2.0"` {
		t.Fatalf("rendered image after adoption: %s %v", v, ok)
	}
}

// The repository's own URL (its origin remote) tells the sources that read it from those that read
// another repository: an Application reading the same path of acme/team is not gated here.
func TestSourcesOfAnotherRepositoryAreNotGatedHere(t *testing.T) {
	e := newEnv(t)
	if out, err := exec.Command("git", "-C", e.dir, "remote", "add", "origin", "https://github.com/acme/infra.git").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	commitFiles(t, e, map[string]string{
		"argocd/team.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: team\n  namespace: argocd\n" +
			"spec:\n  source:\n    repoURL: git@github.com:acme/team.git\n    path: k8s/prod\n  destination:\n    namespace: prod\n",
	}, "The team's Application reads its own repository")
	if got := e.snapshot().Origin; got != "https://github.com/acme/infra.git" {
		t.Fatalf("snapshot origin %q", got)
	}
	replicas := core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	r := only(t, e.ingest(events.SourceK8sAudit, auditList(scale("hpa-team-1", hpaUser, t0, 5))), replicas)
	if r.Change == nil || strings.Join(r.Change.Files, ",") != "clusters/prod/apps.yaml" {
		t.Fatalf("the HPA's gate: %+v: %s", r.Change, r.Note)
	}
	if strings.Contains(e.file("argocd/team.yaml"), "ignoreDifferences") {
		t.Fatal("the Application reading acme/team was gated")
	}
}

// The Kafka scaling agent asks first. 24 is over max_size: refused, with who holds the field and
// nothing recorded. 12 during an incident, for 4 hours: accepted and recorded before the answer.
// The CloudTrail event that follows is the claimed change: it carries the proposal's intent,
// motivation and expiry (the motivation then weighs only as far as the agent may assert it). A later change the agent did not ask for carries none.
func TestProposalsAreJudgedBeforeTheChange(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	agent := core.Actor{Identity: core.Identity{Source: core.SourceAWSPrincipal, ID: agentRole}}
	claim := func(v int, motivation string, expires time.Duration) core.Claim {
		c := core.Claim{Field: capacity, Actor: agent, Value: core.CanonicalJSONValue(strconv.Itoa(v)), Intent: "performance"}
		if motivation != "" {
			c.Motivation = core.Motivation{Kind: motivation, Ref: "INC-7"}
		}
		if expires > 0 {
			c.Expires = e.now.Add(expires)
		}
		return c
	}
	got, err := e.rec.Propose(ctx, e.snapshot(), "p-1", []core.Claim{claim(24, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Accepted || got[0].Verdict.Decision != core.DecisionVeto || got[0].Holder == nil || got[0].Holder.Actor.Identity.Source != core.SourceGitAuthor {
		t.Fatalf("24: %+v", got)
	}
	if st, _ := e.state.Standing(ctx, capacity); len(st) != 0 {
		t.Fatalf("a refused proposal stands: %+v", st)
	}
	got, err = e.rec.Propose(ctx, e.snapshot(), "p-2", []core.Claim{claim(12, "incident", 4*time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !got[0].Accepted || got[0].Verdict.Until.IsZero() {
		t.Fatalf("12 during an incident: %+v", got)
	}
	st, _ := e.state.Standing(ctx, capacity)
	if len(st) != 1 || st[0].Evidence.Source != EvidenceProposal || st[0].Motivation.Kind != "incident" {
		t.Fatalf("the accepted proposal does not stand: %+v", st)
	}
	// The agent makes the change it asked for.
	e.now = t0.Add(time.Minute)
	rep := e.ingest(events.SourceCloudTrail, trail("ct-p2", agentRole, "autoscaling.amazonaws.com", "SetDesiredCapacity", e.now,
		`{"autoScalingGroupName":"kafka-consumer","desiredCapacity":12}`))
	r := only(t, rep, capacity)
	if r.Proposal != "p-2" || r.Verdict.Winner == nil || !r.Verdict.Winner.Expires.Equal(t0.Add(4*time.Hour)) {
		t.Fatalf("the asked-for change: proposal %q, winner %+v", r.Proposal, r.Verdict.Winner)
	}
	recs, _ := e.state.Verdicts(ctx, capacity)
	if last := recs[len(recs)-1]; !strings.Contains(last.Note, "the change proposal p-2 asked for") || !slices.Contains(last.Evidence, "proposal/p-2") {
		t.Fatalf("the verdict record: %+v", last)
	}
	// A change it did not ask for.
	e.now = t0.Add(2 * time.Minute)
	rep = e.ingest(events.SourceCloudTrail, trail("ct-p3", agentRole, "autoscaling.amazonaws.com", "SetDesiredCapacity", e.now,
		`{"autoScalingGroupName":"kafka-consumer","desiredCapacity":14}`))
	if r := only(t, rep, capacity); r.Proposal != "" {
		t.Fatalf("an unasked change is attributed to proposal %q", r.Proposal)
	}
	if _, err := e.rec.Propose(ctx, e.snapshot(), "p-4", []core.Claim{claim(10, "", 0), claim(11, "", 0)}); err == nil {
		t.Fatal("two claims on one field in one proposal must be refused")
	}
}

// A claim's dependents reach the policy: raising the database's max_connections is escalated when
// Kubernetes objects read it (the API's pool size), and the explanation lists what depends on it.
func TestDependentsReachThePolicy(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	tf, err := os.ReadFile("depgraph/testdata/repo/infra/db/main.tf")
	if err != nil {
		t.Fatal(err)
	}
	k8s, err := os.ReadFile("depgraph/testdata/repo/k8s/prod/api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pol := e.file(".parley/policy.hcl") + `
rule "dependents-across-teams" {
  description = "A change that Kubernetes objects read is for the teams running them to agree"
  when        = !claim.git && length([for d in claim.dependents : d if d.scheme == "k8s"]) > 0
  decision    = "escalate"
}
`
	commitFiles(t, e, map[string]string{"infra/db/main.tf": string(tf), "k8s/prod/api.yaml": string(k8s), ".parley/policy.hcl": pol}, "The API database")
	f, err := core.ParseField("tf:infra/db//var.max_connections#/default")
	if err != nil {
		t.Fatal(err)
	}
	alice := core.Actor{Identity: core.Identity{Source: core.SourceKubeUser, ID: "alice@parley.example"}}
	got, err := e.rec.Propose(ctx, e.snapshot(), "p-db", []core.Claim{{Field: f, Actor: alice, Value: core.CanonicalJSONValue("400"), Intent: "performance"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Accepted || got[0].Verdict.Decision != core.DecisionEscalate {
		t.Fatalf("max_connections 400: %+v", got)
	}
	explained := arbiter.Explain(got[0].Verdict)
	for _, want := range []string{"[dependents: listed] 5 field(s) depend on this one", "k8s:core/ConfigMap/prod/db-pool#/data/POOL_MAX",
		"tf:infra/db//aws_db_parameter_group.main#/parameter/0/value", "env DB_POOL_MAX from ConfigMap prod/db-pool", "[rule.dependents-across-teams: decided]"} {
		if !strings.Contains(explained, want) {
			t.Errorf("the explanation lacks %q:\n%s", want, explained)
		}
	}
}

// claim.asked lets a policy hold agents to asking first: the Kafka agent's change that carries out
// its accepted proposal stands; the change it makes without asking is vetoed.
func TestAgentsThatDoNotAskAreVetoed(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	commitFiles(t, e, map[string]string{".parley/policy.hcl": e.file(".parley/policy.hcl") + `
rule "agents-ask-first" {
  description = "The Kafka agent asks before it scales"
  when        = claim.actor == "kafka-agent" && !claim.asked
  decision    = "veto"
}
`}, "Agents ask first")
	agent := core.Actor{Identity: core.Identity{Source: core.SourceAWSPrincipal, ID: agentRole}}
	got, err := e.rec.Propose(ctx, e.snapshot(), "p-ask", []core.Claim{{Field: capacity, Actor: agent, Value: core.CanonicalJSONValue("12"),
		Intent: "performance", Expires: e.now.Add(4 * time.Hour)}})
	if err != nil || len(got) != 1 || !got[0].Accepted {
		t.Fatalf("the proposal: %+v %v", got, err)
	}
	e.now = t0.Add(time.Minute)
	r := only(t, e.ingest(events.SourceCloudTrail, trail("ct-ask-1", agentRole, "autoscaling.amazonaws.com", "SetDesiredCapacity", e.now,
		`{"autoScalingGroupName":"kafka-consumer","desiredCapacity":12}`)), capacity)
	if r.Verdict.Decision != core.DecisionYield || r.Verdict.Winner == nil || r.Verdict.Winner.Evidence.Proposal != "p-ask" {
		t.Fatalf("the asked-for change: %s (%s), winner %+v", r.Verdict.Decision, r.Verdict.Rule, r.Verdict.Winner)
	}
	e.now = t0.Add(2 * time.Minute)
	r = only(t, e.ingest(events.SourceCloudTrail, trail("ct-ask-2", agentRole, "autoscaling.amazonaws.com", "SetDesiredCapacity", e.now,
		`{"autoScalingGroupName":"kafka-consumer","desiredCapacity":14}`)), capacity)
	if r.Verdict.Decision != core.DecisionVeto || !strings.Contains(arbiter.Explain(r.Verdict), "agents-ask-first") {
		t.Fatalf("the unasked change: %s (%s)\n%s", r.Verdict.Decision, r.Verdict.Rule, arbiter.Explain(r.Verdict))
	}
}

// TestAHoldWithNobodyNamedAsksTheFieldsCodeOwners: the policy has no escalation ask. When the
// agent and on-call flip the Kafka capacity, the hold's pull request asks the code owners of
// infra/kafka/main.tf by the repository's CODEOWNERS; with no line covering the file it says
// plainly that nobody is asked.
func TestAHoldWithNobodyNamedAsksTheFieldsCodeOwners(t *testing.T) {
	for _, tt := range []struct {
		name, codeowners, want string
		ask                    []string
	}{
		{"owned", "*.yaml @acme/platform\n/infra/kafka/ @acme/data-platform\n",
			"@acme/data-platform: you are asked to decide (the policy names nobody to ask for this hold; asking the code owners of the field instead: @acme/data-platform (line 2 of .github/CODEOWNERS (/infra/kafka/) covers infra/kafka/main.tf, the file that defines the field))",
			[]string{"@acme/data-platform"}},
		{"unowned", "*.yaml @acme/platform\n",
			"Nobody is asked: the policy names nobody to ask for this hold (no escalation ask), and no code owner either: no line of .github/CODEOWNERS covers infra/kafka/main.tf",
			nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			pol := filepath.Join(e.dir, ".parley/policy.hcl")
			src, _ := os.ReadFile(pol)
			edited := strings.Replace(string(src), `  ask      = ["@parleyhq/sre"]`+"\n", "", 1)
			if edited == string(src) {
				t.Fatal("the demo policy no longer asks @parleyhq/sre")
			}
			os.WriteFile(pol, []byte(edited), 0o644)
			os.MkdirAll(filepath.Join(e.dir, ".github"), 0o755)
			os.WriteFile(filepath.Join(e.dir, ".github/CODEOWNERS"), []byte(tt.codeowners), 0o644)
			e.git.Run("add", "-A")
			e.git.Run("commit", "-q", "-m", "Nobody named to ask; code owners instead")
			remote := filepath.Join(t.TempDir(), "remote.git")
			e.git.Run("clone", "-q", "--bare", e.dir, remote)
			follow := func() { e.git.Run("fetch", "-q", remote, "main"); e.git.Run("reset", "-q", "--hard", "FETCH_HEAD") }
			prs := &recordedPRs{}
			e.rec.Writer = &GitWriter{URL: remote, Base: "main", Mode: ModeDirect, PRs: prs, Author: object.Signature{Name: "Parley", Email: "p@x"},
				Now: func() time.Time { return e.now }}
			var held *Result
			for i := 0; i < 8 && held == nil; i++ {
				follow()
				e.now = t0.Add(time.Duration(i) * 2 * time.Minute)
				who, n := agentRole, 12
				if i%2 == 1 {
					who, n = oncallARN, 7
				}
				rep := e.ingest(events.SourceCloudTrail, trail(fmt.Sprintf("flip-%d", i), who, "autoscaling.amazonaws.com", "SetDesiredCapacity", e.now,
					fmt.Sprintf(`{"autoScalingGroupName":"kafka-consumer","desiredCapacity":%d}`, n)))
				if r := only(t, rep, capacity); r.Verdict.Decision == core.DecisionHold {
					held = &r
				}
			}
			if held == nil || held.Landed == nil || held.Landed.PR == 0 {
				t.Fatalf("the hold was not put on a pull request: %+v", held)
			}
			if !slices.Equal(held.Verdict.Ask, tt.ask) {
				t.Fatalf("the hold asks %v, want %v", held.Verdict.Ask, tt.ask)
			}
			if body := prs.comments[held.Landed.PR][0]; !strings.Contains(shown(t, body), tt.want) {
				t.Fatalf("the pull request does not say %q:\n%s", tt.want, body)
			}
		})
	}
}

// chartsRendered is a Helm renderer that renders in process and records the charts it rendered.
type chartsRendered struct{ charts []string }

func (r *chartsRendered) RenderHelm(ctx context.Context, job gitops.HelmJob) (map[string]string, error) {
	r.charts = append(r.charts, job.Chart)
	return gitops.InProcess{}.RenderHelm(ctx, job)
}

func TestSnapshotsRenderChartsWithTheCachesRenderer(t *testing.T) {
	e := newEnv(t)
	addShopChart(t, e, "")
	r := &chartsRendered{}
	c := SnapshotCache{Helm: r} // the App gives a gitops.RenderProcess here
	s, err := c.Load(context.Background(), e.dir, "main", ".parley/policy.hcl", e.led, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.inventory() == nil || len(r.charts) == 0 || r.charts[0] != "charts/shop" {
		t.Errorf("charts rendered through the cache's renderer: %v, want charts/shop", r.charts)
	}
}
