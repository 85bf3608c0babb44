package app

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/app/internal/ghauth"
	"github.com/parleyhq/parley/app/internal/repocache"
	"github.com/parleyhq/parley/app/report"
	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/internal/keymutex"
	"github.com/parleyhq/parley/internal/schematest"
	"github.com/parleyhq/parley/webhooks/store"
)

const webYAML = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: prod}
spec:
  replicas: 3
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: prod}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxReplicas: 20
`

const kafkaTF = `resource "aws_autoscaling_group" "consumer" {
  min_size         = 4
  max_size         = 16
  desired_capacity = 6
}
`

// remote is the repository GitHub would host: main with the policy and manifests, and the pull
// request's head under refs/pull/7/head, as GitHub exposes it.
func remote(t testing.TB) (dir string, git func(args ...string) string) {
	t.Helper()
	dir = t.TempDir()
	r := gittest.New(t, dir).As("Cost Bot", "cost-optimizer@parley.example")
	r.Env = append(r.Env, "GIT_AUTHOR_DATE=2026-11-20T10:00:00Z", "GIT_COMMITTER_DATE=2026-11-20T10:00:00Z")
	git = r.Run
	pol, err := os.ReadFile(filepath.Join("..", "internal", "demo", "policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644)
	}
	git("init", "-q", "-b", "main")
	write(".parley/policy.hcl", string(pol))
	write("k8s/prod/web.yaml", webYAML)
	write("infra/kafka/main.tf", kafkaTF)
	git("add", ".")
	git("commit", "-q", "-m", "Baseline")
	git("checkout", "-q", "-b", "rightsize")
	write("infra/kafka/main.tf", strings.Replace(kafkaTF, "desired_capacity = 6", "desired_capacity = 20", 1))
	git("commit", "-q", "-am", "Right-size the consumers\n\nIntent: cost\nMotivation: budget\n")
	git("update-ref", "refs/pull/7/head", "HEAD")
	git("checkout", "-q", "main")
	return dir, git
}

// prEvent is GitHub's own pull_request "opened" example payload, pointed at the test repository.
func prEvent(t testing.TB, cloneURL, base, head, action string) []byte {
	return example(t, "pull_request", "opened", func(ev map[string]any) {
		pointAt(ev, cloneURL)
		ev["action"], ev["number"] = action, 7
		pr := ev["pull_request"].(map[string]any)
		pr["number"], pr["title"], pr["body"] = 7, "Right-size the consumers", "Monthly budget review."
		pr["head"].(map[string]any)["sha"] = head
		pr["base"].(map[string]any)["sha"] = base
		pr["user"].(map[string]any)["login"] = "cost-optimizer[bot]"
	})
}

// fakeApp is a fake GitHub that knows the App (ID 99) and the App's key, and the App's client
// pointed at it. pemKey is the App's private key, for configurations.
func fakeApp(t testing.TB) (gh *fakegithub.Server, app *ghauth.App, pemKey []byte) {
	t.Helper()
	gh = fakegithub.New(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	gh.AppPublicKey, gh.AppID = &key.PublicKey, 99
	pemKey = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	app, err = ghauth.NewApp(99, pemKey, ghauth.Options{BaseURL: gh.URL + "/api/v3/", Client: gh.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return gh, app, pemKey
}

func handler(t testing.TB) (*PullRequests, *fakegithub.Server) {
	t.Helper()
	gh, app, _ := fakeApp(t)
	return &PullRequests{Installations: InstallationAuth{App: app, Base: gh.Client().Transport},
		Repos: &repocache.Cache{Dir: t.TempDir()}, Now: func() time.Time { return time.Date(2026, 11, 20, 10, 5, 0, 0, time.UTC) }}, gh
}

func TestPullRequestVerdictsArePublishedOnceAndEditedInPlace(t *testing.T) {
	dir, git := remote(t)
	h, gh := handler(t)
	base, head := git("rev-parse", "main"), git("rev-parse", "refs/pull/7/head")
	// The cost optimizer's commits are its own: GitHub verified their signatures.
	botCommit := fakegithub.Commit{AuthorLogin: "cost-optimizer[bot]", CommitterLogin: "cost-optimizer[bot]", Verified: true}
	gh.SetCommit("acme/infra", head, botCommit)
	deliver := func(action, head string) {
		t.Helper()
		if err := h.Handle(context.Background(), store.Delivery{ID: "d-" + action + head[:6], Event: "pull_request", Body: prEvent(t, dir, base, head, action)}); err != nil {
			t.Fatal(err)
		}
	}

	deliver("opened", head)
	runs := gh.CheckRuns("acme/infra")
	if len(runs) != 1 || runs[0].Name != "parley" || runs[0].HeadSHA != head || runs[0].Conclusion != "failure" {
		t.Fatalf("check runs %+v: want one failing parley run (desired_capacity 20 is above max_size 16)", runs)
	}
	comments := gh.Comments("acme/infra#7")
	if len(comments) != 1 || !strings.HasPrefix(comments[0].Body, report.Marker) {
		t.Fatalf("comments %+v", comments)
	}
	// The document other bots read matches its published schema, as GitHub stores it.
	raw, err := report.RawData(comments[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	schematest.Validate(t, "verdicts-document.schema.json", raw)
	doc, err := report.Extract(comments[0].Body)
	if err != nil || len(doc.Verdicts) != 1 || doc.Verdicts[0].Decision != "veto" || doc.Head != head {
		t.Fatalf("verdicts in the comment: %+v, %v", doc, err)
	}

	// A redelivery, or an edit that changes nothing, reads at most 4 times and writes nothing.
	writes, calls := len(gh.Writes()), gh.TotalCalls()
	deliver("edited", head)
	if w := len(gh.Writes()); w != writes {
		t.Errorf("an unchanged verdict wrote %d times", w-writes)
	}
	if c := gh.TotalCalls() - calls; c > 4 {
		t.Errorf("an unchanged verdict made %d API calls, want at most 4 (%v)", c, gh.Calls())
	}

	// A new push fixes the capacity: a new check run for the new head, the same comment edited.
	git("checkout", "-q", "rightsize")
	os.WriteFile(filepath.Join(dir, "infra/kafka/main.tf"), []byte(strings.Replace(kafkaTF, "desired_capacity = 6", "desired_capacity = 12", 1)), 0o644)
	git("commit", "-q", "-am", "Stay inside the bounds\n\nIntent: cost\nMotivation: budget\n")
	head2 := git("rev-parse", "HEAD")
	gh.SetCommit("acme/infra", head2, botCommit)
	git("update-ref", "refs/pull/7/head", head2)
	deliver("synchronize", head2)
	runs = gh.CheckRuns("acme/infra")
	if len(runs) != 2 || runs[1].HeadSHA != head2 || runs[1].Conclusion == "failure" {
		t.Fatalf("after the fix: check runs %+v", runs)
	}
	comments = gh.Comments("acme/infra#7")
	if len(comments) != 1 || !strings.Contains(comments[0].Body, head2) {
		t.Fatalf("the sticky comment must be edited in place, not re-posted: %d comments", len(comments))
	}
	if err := h.Handle(context.Background(), store.Delivery{ID: "closed", Event: "pull_request", Body: prEvent(t, dir, base, head2, "closed")}); err != nil {
		t.Fatal(err)
	}
	if len(gh.CheckRuns("acme/infra")) != 2 {
		t.Error("a closed pull request must not be judged")
	}
}

func TestPullRequestWithoutPolicy(t *testing.T) {
	dir, git := remote(t)
	git("rm", "-q", ".parley/policy.hcl")
	git("commit", "-q", "-m", "No policy")
	h, gh := handler(t)
	if err := h.Handle(context.Background(), store.Delivery{ID: "x", Event: "pull_request",
		Body: prEvent(t, dir, git("rev-parse", "main"), git("rev-parse", "refs/pull/7/head"), "opened")}); err != nil {
		t.Fatal(err)
	}
	runs := gh.CheckRuns("acme/infra")
	if len(runs) != 1 || runs[0].Conclusion != "neutral" || !strings.Contains(runs[0].Summary, "parley init") {
		t.Fatalf("check runs %+v", runs)
	}
	if len(gh.Comments("acme/infra#7")) != 0 {
		t.Error("no comment is written when nothing was judged")
	}
}

// TestPullRequestUnderAnInvalidPolicy: a policy that does not parse judges nothing, and what is
// not judged does not pass (issue 33): action_required, where a repository without any policy
// is neutral.
func TestPullRequestUnderAnInvalidPolicy(t *testing.T) {
	dir, git := remote(t)
	if err := os.WriteFile(filepath.Join(dir, ".parley/policy.hcl"), []byte("field \"x\" {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("commit", "-q", "-am", "Break the policy")
	h, gh := handler(t)
	if err := h.Handle(context.Background(), store.Delivery{ID: "x", Event: "pull_request",
		Body: prEvent(t, dir, git("rev-parse", "main"), git("rev-parse", "refs/pull/7/head"), "opened")}); err != nil {
		t.Fatal(err)
	}
	runs := gh.CheckRuns("acme/infra")
	if len(runs) != 1 || runs[0].Conclusion != "action_required" || !strings.Contains(runs[0].Summary, "is invalid, so nothing was judged") {
		t.Fatalf("check runs %+v", runs)
	}
}

func TestMalformedDeliveryIsPermanent(t *testing.T) {
	h, _ := handler(t)
	err := h.Handle(context.Background(), store.Delivery{ID: "bad", Event: "pull_request", Body: []byte(`{"action":"opened"}`)})
	if err == nil || !strings.Contains(err.Error(), "lacks") {
		t.Fatalf("want a permanent error, got %v", err)
	}
}

// TestPullRequestBehindAMovedBase: the branch merged main, and main moved again after the event
// was sent. The pull request is judged on its own change only: measured from the merge base with
// the base branch as fetched, not from the event's older base.sha (from which the merged main's
// changes would count as the pull request's).
func TestPullRequestBehindAMovedBase(t *testing.T) {
	dir, git := remote(t)
	oldBase := git("rev-parse", "main")
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("k8s/prod/web.yaml", strings.Replace(webYAML, "maxReplicas: 20", "maxReplicas: 25", 1))
	git("commit", "-q", "-am", "Raise the web ceiling\n\nIntent: availability\n")
	git("checkout", "-q", "rightsize")
	git("merge", "-q", "--no-edit", "main")
	git("update-ref", "refs/pull/7/head", "HEAD")
	head := git("rev-parse", "HEAD")
	git("checkout", "-q", "main")
	write("k8s/prod/web.yaml", strings.Replace(webYAML, "maxReplicas: 20", "maxReplicas: 30", 1))
	git("commit", "-q", "-am", "Raise it again\n\nIntent: availability\n")

	h, gh := handler(t)
	ev := example(t, "pull_request", "opened", func(ev map[string]any) {
		pointAt(ev, dir)
		ev["number"] = 7
		pr := ev["pull_request"].(map[string]any)
		pr["number"] = 7
		pr["head"] = map[string]any{"sha": head, "ref": "rightsize"}
		pr["base"] = map[string]any{"sha": oldBase, "ref": "main"}
		pr["user"].(map[string]any)["login"] = "cost-optimizer[bot]"
	})
	if err := h.Handle(context.Background(), store.Delivery{ID: "moved", Event: "pull_request", Body: ev}); err != nil {
		t.Fatal(err)
	}
	comments := gh.Comments("acme/infra#7")
	if len(comments) != 1 {
		t.Fatalf("%d comments", len(comments))
	}
	doc, err := report.Extract(comments[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, v := range doc.Verdicts {
		fields = append(fields, v.Field.String())
	}
	if len(fields) != 1 || fields[0] != "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity" {
		t.Errorf("judged %v; want only the branch's desired_capacity", fields)
	}
}

// TestPullRequestJudgedByTwoReplicasAtOnce: deliveries of one pull request judged side by side by
// two replicas (each with its own clone cache, sharing a lock as replicas share PostgreSQL's
// advisory locks) still leave one check run and one sticky comment: each judgement finds the one
// before it.
func TestPullRequestJudgedByTwoReplicasAtOnce(t *testing.T) {
	dir, git := remote(t)
	a, gh := handler(t)
	b := &PullRequests{Installations: a.Installations, Repos: &repocache.Cache{Dir: t.TempDir()}, Now: a.Now}
	var shared keymutex.Map
	a.Lock, b.Lock = shared.Lock, shared.Lock
	base, head := git("rev-parse", "main"), git("rev-parse", "refs/pull/7/head")
	var wg sync.WaitGroup
	for i, h := range []*PullRequests{a, b, a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			action := []string{"opened", "edited", "reopened"}[i%3]
			if err := h.Handle(context.Background(), store.Delivery{ID: fmt.Sprint("d", i), Event: "pull_request", Body: prEvent(t, dir, base, head, action)}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if runs := gh.CheckRuns("acme/infra"); len(runs) != 1 {
		t.Errorf("%d check runs for one head, want 1", len(runs))
	}
	if comments := gh.Comments("acme/infra#7"); len(comments) != 1 {
		t.Errorf("%d sticky comments, want 1", len(comments))
	}
}

// TestAClosedProposalSaysTheVetoStands: people close the pull request of a veto put to people
// without merging it: Parley says on it that the veto stands. A merged proposal, or another closed
// pull request (a person's, or from another branch), gets no word.
func TestAClosedProposalSaysTheVetoStands(t *testing.T) {
	h, gh := handler(t)
	closed := func(number int, ref, userType string, merged bool) []byte {
		return example(t, "pull_request", "closed", func(ev map[string]any) {
			pointAt(ev, "https://github.com/acme/infra.git")
			pr := ev["pull_request"].(map[string]any)
			pr["number"], pr["merged"] = number, merged
			pr["user"].(map[string]any)["type"] = userType
			head := pr["head"].(map[string]any)
			head["ref"] = ref
			head["repo"].(map[string]any)["full_name"] = "acme/infra"
		})
	}
	for i, tc := range []struct {
		number   int
		ref, typ string
		merged   bool
		says     bool
	}{
		{9, "parley/propose/aws_iam_role_policy.consumer-policy-1a2b3c4d", "Bot", false, true},
		{10, "parley/propose/aws_iam_role_policy.consumer-policy-1a2b3c4d", "Bot", true, false},
		{11, "parley/propose/made-up-by-a-person", "User", false, false},
		{12, "parley/aws_autoscaling_group.consumer-desired_capacity-0e0e0e0e", "Bot", false, false},
	} {
		if err := h.Handle(context.Background(), store.Delivery{ID: fmt.Sprintf("c-%d", i), Event: "pull_request", Body: closed(tc.number, tc.ref, tc.typ, tc.merged)}); err != nil {
			t.Fatal(err)
		}
		cs := gh.Comments(fmt.Sprintf("acme/infra#%d", tc.number))
		if got := len(cs) == 1 && strings.Contains(cs[0].Body, "the veto stands"); got != tc.says || (!tc.says && len(cs) != 0) {
			t.Errorf("#%d (%s, %s, merged %v): comments %+v", tc.number, tc.ref, tc.typ, tc.merged, cs)
		}
	}
}
