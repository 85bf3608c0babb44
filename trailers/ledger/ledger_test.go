package ledger_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/ledgertest"
	"github.com/parleyhq/parley/trailers/ledger"
)

const (
	replicasAddr = "k8s:apps/Deployment/prod/web#/spec/replicas"
	desiredAddr  = "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity"
)

// want describes one expected claim in a history.
type want struct {
	commit   string
	email    string
	value    any // nil: absent; "yield" for a yield
	intent   core.Intent
	declared bool
	explicit bool
	changed  bool
	mot      string
	pr       int
	expires  time.Time
}

func checkHistory(t *testing.T, l *ledger.Ledger, addr string, wants []want) []ledger.Entry {
	t.Helper()
	es, err := l.Entries(mustField(t, addr))
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != len(wants) {
		for _, e := range es {
			t.Logf("  %s %s %s changed=%v", e.Evidence.Commit[:8], e.Actor.Identity.ID, e.Value, e.Changed)
		}
		t.Fatalf("%s: %d claims, want %d", addr, len(es), len(wants))
	}
	for i, w := range wants {
		e := es[i]
		if w.commit != "" && e.Evidence.Commit != w.commit {
			t.Errorf("%s[%d]: commit %s, want %s", addr, i, e.Evidence.Commit, w.commit)
		}
		if e.Actor.Identity.ID != w.email || e.Actor.Identity.Source != core.SourceGitAuthor {
			t.Errorf("%s[%d]: actor %v, want git-author:%s", addr, i, e.Actor.Identity, w.email)
		}
		switch v := w.value.(type) {
		case nil:
			if !e.Value.Absent() || e.Yield {
				t.Errorf("%s[%d]: value %s yield=%v, want absent", addr, i, e.Value, e.Yield)
			}
		case string:
			if v == "yield" {
				if !e.Yield {
					t.Errorf("%s[%d]: not a yield", addr, i)
				}
				break
			}
			if got := e.Value; got != jsonValue(t, v) {
				t.Errorf("%s[%d]: value %s, want %q", addr, i, got, v)
			}
		default:
			if got := e.Value; got != jsonValue(t, v) {
				t.Errorf("%s[%d]: value %s, want %v", addr, i, got, v)
			}
		}
		if e.Intent != w.intent || e.IntentDeclared != w.declared {
			t.Errorf("%s[%d]: intent %s declared=%v, want %s declared=%v", addr, i, e.Intent, e.IntentDeclared, w.intent, w.declared)
		}
		if e.Evidence.Explicit != w.explicit || e.Changed != w.changed {
			t.Errorf("%s[%d]: explicit=%v changed=%v, want %v %v", addr, i, e.Evidence.Explicit, e.Changed, w.explicit, w.changed)
		}
		if got := e.Motivation.String(); got != w.mot {
			t.Errorf("%s[%d]: motivation %q, want %q", addr, i, got, w.mot)
		}
		if e.Evidence.PR != w.pr || e.Evidence.Source != "git" {
			t.Errorf("%s[%d]: evidence %+v, want source git, PR %d", addr, i, e.Evidence, w.pr)
		}
		if !e.Expires.Equal(w.expires) {
			t.Errorf("%s[%d]: expires %v, want %v", addr, i, e.Expires, w.expires)
		}
	}
	return es
}

func TestHistoryAndCurrent(t *testing.T) {
	r := newGoGitRepo(t)
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 3, "1.0"))
	c1 := r.commit("Dana Okafor", "dana@parley.example", "Add web\n")
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 8, "1.0"))
	c2 := r.commit("Alice Martin", "alice@parley.example", "Scale web for INC-4211\n\nIntent: availability\n"+
		"Motivation: incident INC-4211 severity=high\nExpires: 4h\nClaim: "+replicasAddr+"\n")
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 8, "1.1"))
	r.commit("Security Scanner", "scanner@parley.example", "Bump web\n\nIntent: security\nMotivation: cve CVE-2026-1234\n")
	// A claim on the value Git already holds: the optimizer takes the field over without changing it.
	c4 := r.commit("Cost Optimizer", "cost-optimizer@parley.example", "Keep web at 8\n\nIntent: cost\nMotivation: budget\n"+
		"Claim: "+replicasAddr+" = 8\n")
	// A claim on a value Git does not hold is a wish, not Git's value.
	c5 := r.commit("Bob Chen", "bob@parley.example", "Want 2\n\nIntent: cost\nClaim: "+replicasAddr+" = 2\n")
	c6 := r.commit("Alice Martin", "alice@parley.example", "Hand back\n\nIntent: availability\nYield: "+replicasAddr+"\n")

	l := openLedger(t, r.dir)
	st := update(t, l, "main")
	if st.Commits != 6 || st.From != "" || st.Rebuilt || st.To != c6 || st.Branch != "refs/heads/main" {
		t.Fatalf("stats %+v", st)
	}
	checkHistory(t, l, replicasAddr, []want{
		{commit: c1, email: "dana@parley.example", value: 3, intent: core.IntentBaseline, changed: true},
		{commit: c2, email: "alice@parley.example", value: 8, intent: core.IntentAvailability, declared: true, explicit: true,
			changed: true, mot: "incident INC-4211 severity=high", expires: t0.Add(time.Hour + 4*time.Hour)},
		{commit: c4, email: "cost-optimizer@parley.example", value: 8, intent: core.IntentCost, declared: true, explicit: true, mot: "budget"},
		{commit: c5, email: "bob@parley.example", value: 2, intent: core.IntentCost, declared: true, explicit: true},
		{commit: c6, email: "alice@parley.example", value: "yield", intent: core.IntentAvailability, declared: true, explicit: true},
	})
	cur, ok, err := l.Current(mustField(t, replicasAddr))
	if err != nil || !ok {
		t.Fatalf("Current: ok=%v err=%v", ok, err)
	}
	if cur.Evidence.Commit != c4 || cur.Value != jsonValue(t, 8) || cur.Actor.Identity.ID != "cost-optimizer@parley.example" {
		t.Errorf("Current = %v from %s, want the optimizer's claim of 8 in %s", cur, cur.Evidence.Commit, c4)
	}
	hist, err := l.History(mustField(t, replicasAddr))
	if err != nil || len(hist) != 5 || !hist[4].Yield || hist[0].At != t0 {
		t.Errorf("History: %d claims, err %v", len(hist), err)
	}
	if _, ok, err := l.Current(mustField(t, "k8s:apps/Deployment/prod/nothere#/spec/replicas")); ok || err != nil {
		t.Errorf("Current of an unknown field: ok=%v err=%v", ok, err)
	}
}

func TestMergeSquashAndPRNumbers(t *testing.T) {
	r := newGitRepo(t)
	r.write("infra/kafka/main.tf", asg(6))
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 3, "1.0"))
	r.commit("Dana Okafor", "dana@parley.example", "Initial\n")
	r.git("checkout", "--quiet", "-b", "bob/scale")
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 5, "1.0"))
	feature := r.commit("Bob Chen", "bob@parley.example", "Scale web\n\nIntent: performance\nMotivation: traffic\n")
	r.git("checkout", "--quiet", "main")
	r.write("infra/kafka/main.tf", asg(4))
	squash := r.commit("Cost Optimizer", "cost-optimizer@parley.example", "Right-size consumers (#15)\n\nIntent: cost\nMotivation: budget\n")
	r.git("merge", "--quiet", "--no-ff", "bob/scale", "-m", "Merge pull request #12 from bob/scale\n\nScale web\n\nIntent: performance\nMotivation: traffic\n")
	merge := r.git("rev-parse", "HEAD")
	r.Clock.Tick()
	r.write("infra/kafka/main.tf", asg(12))
	trailerPR := r.commit("Alice Martin", "alice@parley.example", "Scale consumers\n\nIntent: availability\nParley-PR: 17\n")

	l := openLedger(t, r.dir)
	if st := update(t, l, ""); st.Commits != 4 || st.Branch != "refs/heads/main" {
		t.Fatalf("stats %+v (the feature commit is not on the first-parent history)", st)
	}
	es := checkHistory(t, l, replicasAddr, []want{
		{email: "dana@parley.example", value: 3, intent: core.IntentBaseline, changed: true},
		{commit: merge, email: "dana@parley.example", value: 5, intent: core.IntentPerformance, declared: true, changed: true, mot: "traffic", pr: 12},
	})
	if es[1].Parents != 2 || es[1].Evidence.Commit == feature {
		t.Errorf("merge entry: parents %d commit %s", es[1].Parents, es[1].Evidence.Commit)
	}
	checkHistory(t, l, desiredAddr, []want{
		{email: "dana@parley.example", value: 6, intent: core.IntentBaseline, changed: true},
		{commit: squash, email: "cost-optimizer@parley.example", value: 4, intent: core.IntentCost, declared: true, changed: true, mot: "budget", pr: 15},
		{commit: trailerPR, email: "alice@parley.example", value: 12, intent: core.IntentAvailability, declared: true, changed: true, pr: 17},
	})
}

func TestProblemsAreRecorded(t *testing.T) {
	r := newGitRepo(t)
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 3, "1.0"))
	r.write("charts/web/templates/deployment.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ include \"web.fullname\" . }}\nspec:\n  replicas: {{ .Values.replicas }}\n{{- if .Values.hpa }}\n  strategy: {}\n{{- end }}\n")
	r.commit("Dana Okafor", "dana@parley.example", "Initial\n")
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 4, "1.0"))
	bad := r.commit("Bob Chen", "bob@parley.example", "Scale\n\nIntent: availability\nExpires: after lunch\nClaim: not-an-address\nSigned-off-by: Bob Chen <bob@parley.example>\n")
	l := openLedger(t, r.dir)
	st := update(t, l, "main")
	if st.Commits != 2 || st.Problems < 3 {
		t.Fatalf("stats %+v, want 2 commits and at least 3 problems", st)
	}
	probs, err := l.Problems()
	if err != nil {
		t.Fatal(err)
	}
	var template, expires, claim bool
	for _, p := range probs {
		switch {
		case p.Path == "charts/web/templates/deployment.yaml":
			template = true
		case p.Commit == bad && p.Key == "Expires" && p.Line == 4:
			expires = true
		case p.Commit == bad && p.Key == "Claim" && p.Line == 5:
			claim = true
		}
	}
	if !template || !expires || !claim {
		t.Errorf("problems %v: template=%v expires=%v claim=%v", probs, template, expires, claim)
	}
	// The rest of the commit still counts: the change and its intent.
	checkHistory(t, l, replicasAddr, []want{
		{email: "dana@parley.example", value: 3, intent: core.IntentBaseline, changed: true},
		{commit: bad, email: "bob@parley.example", value: 4, intent: core.IntentAvailability, declared: true, changed: true},
	})
}

func TestClaimValueDisagreeingWithChangeIsAProblem(t *testing.T) {
	r := newGoGitRepo(t)
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 3, "1.0"))
	r.commit("Dana Okafor", "dana@parley.example", "Initial\n")
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 4, "1.0"))
	c := r.commit("Bob Chen", "bob@parley.example", "Scale\n\nIntent: availability\nClaim: "+replicasAddr+" = 5\n")
	l := openLedger(t, r.dir)
	update(t, l, "main")
	probs, err := l.Problems()
	if err != nil || len(probs) != 1 || probs[0].Commit != c || !strings.Contains(probs[0].Message, "sets it to 4") {
		t.Fatalf("problems %v, err %v", probs, err)
	}
	checkHistory(t, l, replicasAddr, []want{
		{email: "dana@parley.example", value: 3, intent: core.IntentBaseline, changed: true},
		{commit: c, email: "bob@parley.example", value: 4, intent: core.IntentAvailability, declared: true, changed: true, explicit: true},
	})
}

func TestRemovalAndMove(t *testing.T) {
	r := newGitRepo(t)
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 3, "1.0"))
	r.write("k8s/prod/api.yaml", deployment("prod", "api", 2, "1.0"))
	r.commit("Dana Okafor", "dana@parley.example", "Initial\n")
	// The same object moved to another file is not a change.
	r.git("mv", "k8s/prod/web.yaml", "k8s/prod/web-deployment.yaml")
	r.commit("Dana Okafor", "dana@parley.example", "Rename\n")
	if err := os.Remove(filepath.Join(r.dir, "k8s/prod/api.yaml")); err != nil {
		t.Fatal(err)
	}
	removed := r.commit("Bob Chen", "bob@parley.example", "Retire api\n\nIntent: cost\n")
	l := openLedger(t, r.dir)
	update(t, l, "main")
	checkHistory(t, l, replicasAddr, []want{{email: "dana@parley.example", value: 3, intent: core.IntentBaseline, changed: true}})
	apiReplicas := "k8s:apps/Deployment/prod/api#/spec/replicas"
	checkHistory(t, l, apiReplicas, []want{
		{email: "dana@parley.example", value: 2, intent: core.IntentBaseline, changed: true},
		{commit: removed, email: "bob@parley.example", value: nil, intent: core.IntentCost, declared: true, changed: true},
	})
	cur, ok, err := l.Current(mustField(t, apiReplicas))
	if err != nil || !ok || !cur.Value.Absent() || cur.Evidence.Commit != removed {
		t.Errorf("Current of a removed field = %v ok=%v err=%v, want the removal", cur, ok, err)
	}
}

func TestIncrementalUpdateReadsOnlyNewCommits(t *testing.T) {
	r := newGitRepo(t)
	r.write("infra/kafka/main.tf", asg(6))
	r.commit("Dana Okafor", "dana@parley.example", "Initial\n")
	r.write("infra/kafka/main.tf", asg(7))
	first := r.commit("Bob Chen", "bob@parley.example", "More\n\nIntent: performance\n")
	l := openLedger(t, r.dir)
	if st := update(t, l, "main"); st.Commits != 2 {
		t.Fatalf("first update: %+v", st)
	}
	for i, n := range []int{8, 9, 10} {
		r.write("infra/kafka/main.tf", asg(n))
		r.commit("Bob Chen", "bob@parley.example", "More\n\nIntent: performance\nMotivation: traffic\n")
		_ = i
	}
	st := update(t, l, "main")
	if st.Commits != 3 || st.From != first || st.Rebuilt || st.Claims != 3 {
		t.Fatalf("incremental update: %+v, want 3 commits and 3 claims from %s", st, first)
	}
	if st := update(t, l, "main"); st.Commits != 0 {
		t.Fatalf("update without new commits read %d", st.Commits)
	}
	es, err := l.Entries(mustField(t, desiredAddr))
	if err != nil || len(es) != 5 {
		t.Fatalf("history: %d entries, err %v", len(es), err)
	}
	for i, v := range []int{6, 7, 8, 9, 10} {
		if es[i].Value != jsonValue(t, v) {
			t.Errorf("entry %d = %s, want %d", i, es[i].Value, v)
		}
	}
	b, err := l.Branch("main")
	if err != nil {
		t.Fatal(err)
	}
	if tip, n, err := b.Checkpoint(); err != nil || n != 5 || tip != r.git("rev-parse", "HEAD") {
		t.Errorf("checkpoint %s %d %v", tip, n, err)
	}
}

func TestRewrittenBranchIsRebuilt(t *testing.T) {
	r := newGitRepo(t)
	r.write("infra/kafka/main.tf", asg(6))
	r.commit("Dana Okafor", "dana@parley.example", "Initial\n")
	for _, n := range []int{7, 8} {
		r.write("infra/kafka/main.tf", asg(n))
		r.commit("Bob Chen", "bob@parley.example", "More\n\nIntent: performance\n")
	}
	l := openLedger(t, r.dir)
	update(t, l, "main")
	// Force-push: drop the last two commits and commit something else.
	r.git("reset", "--quiet", "--hard", "HEAD~2")
	r.write("infra/kafka/main.tf", asg(5))
	c := r.commit("Cost Optimizer", "cost-optimizer@parley.example", "Less\n\nIntent: cost\n")
	st := update(t, l, "main")
	if !st.Rebuilt || st.Commits != 2 || st.To != c {
		t.Fatalf("stats %+v, want a rebuild of 2 commits", st)
	}
	checkHistory(t, l, desiredAddr, []want{
		{email: "dana@parley.example", value: 6, intent: core.IntentBaseline, changed: true},
		{commit: c, email: "cost-optimizer@parley.example", value: 5, intent: core.IntentCost, declared: true, changed: true},
	})
}

func TestPersistenceAndBranches(t *testing.T) {
	r := newGitRepo(t)
	r.write("infra/kafka/main.tf", asg(6))
	r.commit("Dana Okafor", "dana@parley.example", "Initial\n")
	r.git("branch", "staging")
	r.write("infra/kafka/main.tf", asg(9))
	r.commit("Bob Chen", "bob@parley.example", "More\n\nIntent: performance\n")

	l, err := ledger.Open(r.dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	update(t, l, "main")
	update(t, l, "staging")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.dir, ".git", "parley", "ledger.db")); err != nil {
		t.Fatalf("index not at the default path: %v", err)
	}

	l = openLedger(t, filepath.Join(r.dir, "infra")) // any directory inside the work tree
	for branch, n := range map[string]int{"main": 2, "staging": 1, "refs/heads/staging": 1} {
		b, err := l.Branch(branch)
		if err != nil {
			t.Fatal(err)
		}
		h, err := b.History(mustField(t, desiredAddr))
		if err != nil || len(h) != n {
			t.Errorf("%s after reopening: %d claims (err %v), want %d", branch, len(h), err, n)
		}
	}
	if st := update(t, l, "main"); st.Commits != 0 {
		t.Errorf("update after reopening read %d commits, want 0", st.Commits)
	}
	if _, err := l.Branch("nope"); !errors.Is(err, ledger.ErrNotIndexed) {
		t.Errorf("Branch(nope) = %v, want ErrNotIndexed", err)
	}
	fs, err := l.Fields(core.MustFieldPattern("tf:**//aws_autoscaling_group.*#/*_size"))
	if err != nil || len(fs) != 2 || fs[0].String() != "tf:infra/kafka//aws_autoscaling_group.consumer#/max_size" {
		t.Errorf("Fields = %v, %v", fs, err)
	}
	all, err := l.Fields(core.FieldPattern{})
	if err != nil || len(all) < 3 {
		t.Errorf("Fields(all) = %v, %v", all, err)
	}
}

func TestPatternYieldAppliesToMatchingFields(t *testing.T) {
	r := newGoGitRepo(t)
	r.write("infra/kafka/main.tf", asg(6))
	r.commit("Dana Okafor", "dana@parley.example", "Initial\n")
	c := r.commit("Alice Martin", "alice@parley.example", "Let go\n\nIntent: availability\nYield: tf:infra/**//aws_autoscaling_group.*#/desired_capacity\n")
	l := openLedger(t, r.dir)
	update(t, l, "main")
	checkHistory(t, l, desiredAddr, []want{
		{email: "dana@parley.example", value: 6, intent: core.IntentBaseline, changed: true},
		{commit: c, email: "alice@parley.example", value: "yield", intent: core.IntentAvailability, declared: true, explicit: true},
	})
	h, err := l.History(mustField(t, "tf:infra/kafka//aws_autoscaling_group.consumer#/min_size"))
	if err != nil || len(h) != 1 {
		t.Errorf("a non-matching field got the yield: %d claims, %v", len(h), err)
	}
	if _, ok, _ := l.Current(mustField(t, desiredAddr)); !ok {
		t.Error("a yield must not remove Git's value")
	}
}

func TestErrors(t *testing.T) {
	if _, err := ledger.Open(t.TempDir(), ledger.Options{}); !errors.Is(err, ledger.ErrNotRepository) {
		t.Errorf("Open(non-repository) = %v, want ErrNotRepository", err)
	}
	r := newGoGitRepo(t)
	r.write("a.txt", "x")
	r.commit("Dana Okafor", "dana@parley.example", "Initial\n")
	l := openLedger(t, r.dir)
	if _, err := l.Update(context.Background(), "nope"); !errors.Is(err, ledger.ErrNoBranch) {
		t.Errorf("Update(nope) = %v, want ErrNoBranch", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Update(ctx, "main"); err == nil {
		t.Error("Update with a cancelled context succeeded")
	}
	if st := update(t, l, "main"); st.Commits != 1 {
		t.Errorf("update after a cancelled one: %+v", st)
	}
	if _, err := l.History(mustField(t, replicasAddr)); err != nil {
		t.Errorf("History of a field without claims: %v", err)
	}
}

func TestOtherSchemaVersionIsRebuilt(t *testing.T) {
	r := newGoGitRepo(t)
	r.write("infra/kafka/main.tf", asg(6))
	r.commit("Dana Okafor", "dana@parley.example", "Initial\n")
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := ledger.Open(r.dir, ledger.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	update(t, l, "main")
	l.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE schema_version SET version = 999`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	l, err = ledger.Open(r.dir, ledger.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Branch("main"); !errors.Is(err, ledger.ErrNotIndexed) {
		t.Errorf("after a schema change the index must start empty: %v", err)
	}
	if st := update(t, l, "main"); st.Commits != 1 {
		t.Errorf("rebuild read %d commits", st.Commits)
	}
}

// The ledger must not depend on when updates ran: one full replay equals many small updates.
func TestIncrementalEqualsFull(t *testing.T) {
	r := newGoGitRepo(t)
	tips := []string{}
	for i := range 12 {
		r.write("infra/kafka/main.tf", asg(4+i))
		if i%3 == 0 {
			r.write("k8s/prod/web.yaml", deployment("prod", "web", 1+i, "1."+itoa(i)))
		}
		if i == 5 {
			r.write("k8s/prod/web.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: [broken\n")
		}
		tips = append(tips, r.commit("Bob Chen", "bob@parley.example", "Step\n\nIntent: performance\n"))
	}
	full := openLedgerAt(t, r.dir, filepath.Join(t.TempDir(), "full.db"))
	update(t, full, "main")
	inc := openLedgerAt(t, r.dir, filepath.Join(t.TempDir(), "inc.db"))
	repoRefs := r.repo.Storer
	for _, tip := range tips {
		if err := repoRefs.SetReference(plumbing.NewHashReference("refs/heads/step", plumbing.NewHash(tip))); err != nil {
			t.Fatal(err)
		}
		update(t, inc, "step")
	}
	fields, err := full.Fields(core.FieldPattern{})
	if err != nil || len(fields) == 0 {
		t.Fatalf("fields: %v %v", fields, err)
	}
	stepBranch, err := inc.Branch("step")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		a, _ := full.History(f)
		b, _ := stepBranch.History(f)
		if len(a) != len(b) {
			t.Errorf("%s: full %d claims, incremental %d", f, len(a), len(b))
			continue
		}
		for i := range a {
			if a[i].Evidence.Commit != b[i].Evidence.Commit || a[i].Value != b[i].Value {
				t.Errorf("%s[%d]: full %s=%s, incremental %s=%s", f, i, a[i].Evidence.Commit, a[i].Value, b[i].Evidence.Commit, b[i].Value)
			}
		}
	}
}

func openLedgerAt(t testing.TB, dir, path string) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(dir, ledger.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// Two processes updating one index: the second waits for the first and starts from its checkpoint.
func TestConcurrentUpdatersShareTheIndex(t *testing.T) {
	r := newGitRepo(t)
	for i := range 20 {
		r.write("infra/kafka/main.tf", asg(4+i))
		r.commit("Bob Chen", "bob@parley.example", "Step\n\nIntent: performance\n")
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	a := openLedgerAt(t, r.dir, path)
	b := openLedgerAt(t, r.dir, path)
	errs := make(chan error, 2)
	stats := make(chan ledger.UpdateStats, 2)
	for _, l := range []*ledger.Ledger{a, b} {
		go func() {
			st, err := l.Update(context.Background(), "main")
			stats <- st
			errs <- err
		}()
	}
	total := 0
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		total += (<-stats).Commits
	}
	if total != 20 {
		t.Errorf("the two updates read %d commits together, want 20 (one full replay, one no-op)", total)
	}
	h, err := a.History(mustField(t, desiredAddr))
	if err != nil || len(h) != 20 {
		t.Errorf("history: %d claims, %v", len(h), err)
	}
}

// A linked work tree shares the main repository's index.
func TestLinkedWorktreeUsesTheCommonIndex(t *testing.T) {
	r := newGitRepo(t)
	r.write("infra/kafka/main.tf", asg(6))
	r.commit("Dana Okafor", "dana@parley.example", "Initial\n")
	wt := filepath.Join(t.TempDir(), "wt")
	r.git("worktree", "add", "--quiet", "-b", "feature", wt)
	l := openLedger(t, wt)
	if st := update(t, l, "feature"); st.Commits != 1 {
		t.Fatalf("stats %+v", st)
	}
	if got, want := l.Path(), filepath.Join(r.dir, ".git", "parley", "ledger.db"); got != want {
		t.Errorf("index at %s, want %s", got, want)
	}
	if def, err := l.DefaultBranch(); err != nil || def != "feature" {
		t.Errorf("DefaultBranch in the work tree = %q, %v", def, err)
	}
}

// A shallow clone's history starts at the shallow boundary.
func TestShallowClone(t *testing.T) {
	r := newGitRepo(t)
	for i := range 5 {
		r.write("infra/kafka/main.tf", asg(4+i))
		r.commit("Bob Chen", "bob@parley.example", "Step\n\nIntent: performance\n")
	}
	clone := filepath.Join(t.TempDir(), "clone")
	r.git("clone", "--quiet", "--depth=2", "file://"+r.dir, clone)
	l := openLedger(t, clone)
	if st := update(t, l, "main"); st.Commits != 2 {
		t.Fatalf("stats %+v, want the 2 commits of the shallow history", st)
	}
	checkHistory(t, l, desiredAddr, []want{
		{email: "bob@parley.example", value: 7, intent: core.IntentPerformance, declared: true, changed: true},
		{email: "bob@parley.example", value: 8, intent: core.IntentPerformance, declared: true, changed: true},
	})
}

// TestEmptyFilesAndRevertedVersions: an empty file is a version like any other (its blob has no
// bytes), and a version seen again is taken from the parse cache; neither may stall the update.
func TestEmptyFilesAndRevertedVersions(t *testing.T) {
	r := newGitRepo(t)
	r.write("k8s/prod/empty.yaml", "")
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 3, "1.0"))
	r.commit("Dana Okafor", "dana@parley.example", "Initial\n")
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 5, "1.0"))
	r.write("k8s/prod/empty.yaml", "# still nothing\n")
	r.commit("Dana Okafor", "dana@parley.example", "Scale up\n")
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 3, "1.0")) // the first version again
	r.write("k8s/prod/empty.yaml", "")
	r.commit("Dana Okafor", "dana@parley.example", "Scale down\n")
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 5, "1.0"))
	r.commit("Dana Okafor", "dana@parley.example", "Scale up again\n")
	l := openLedger(t, r.dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := l.Update(ctx, "main"); err != nil {
		t.Fatalf("update: %v", err)
	}
	hist, err := l.History(mustField(t, replicasAddr))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range hist {
		got = append(got, c.Value.String())
	}
	if strings.Join(got, " ") != "3 5 3 5" {
		t.Errorf("replicas history %v, want [3 5 3 5]", got)
	}
}

// TestInterruptedUpdateResumesFromItsCheckpoint: a long first replay commits checkpoints; stopped
// midway (Ctrl-C), it leaves the index at its last checkpoint, and the next update reads only the
// commits after it, ending with the same ledger as an uninterrupted replay.
func TestInterruptedUpdateResumesFromItsCheckpoint(t *testing.T) {
	dir := t.TempDir()
	if err := ledgertest.Generate(context.Background(), dir, ledgertest.Params{Commits: 600, Apps: 4, Modules: 2, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var progress []ledger.Progress
	l, err := ledger.Open(dir, ledger.Options{Path: path, CheckpointCommits: 100, Progress: func(p ledger.Progress) {
		progress = append(progress, p)
		if p.Done == 250 {
			cancel()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Update(ctx, "main")
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "resumes") {
		t.Fatalf("interrupted update: %v, want context.Canceled saying it resumes", err)
	}
	if len(progress) < 250 || progress[0].Total != 600 || progress[0].Done != 1 {
		t.Errorf("progress: %d calls, first %+v", len(progress), progress[0])
	}
	l.Close()

	// The resumed update checkpoints too (and must keep going after it does).
	if l, err = ledger.Open(dir, ledger.Options{Path: path, CheckpointCommits: 100}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	b, err := l.Branch("main")
	if err != nil {
		t.Fatalf("the checkpoint was not kept: %v", err)
	}
	_, commits, err := b.Checkpoint()
	if err != nil || commits != 200 {
		t.Fatalf("checkpoint after the interruption: %d commits (%v), want 200 (the last multiple of 100 before 250)", commits, err)
	}
	stats, err := l.Update(context.Background(), "main")
	if err != nil || stats.From == "" || stats.Commits != 400 || stats.Rebuilt {
		t.Fatalf("resumed update: %+v, %v; want the 400 commits after the checkpoint", stats, err)
	}

	full := openLedgerAt(t, dir, filepath.Join(t.TempDir(), "full.db"))
	update(t, full, "main")
	fields, err := full.Fields(core.FieldPattern{})
	if err != nil || len(fields) == 0 {
		t.Fatalf("fields: %d, %v", len(fields), err)
	}
	for _, f := range fields {
		a, _ := full.History(f)
		r, _ := l.History(f)
		if len(a) != len(r) {
			t.Errorf("%s: uninterrupted %d claims, resumed %d", f, len(a), len(r))
			continue
		}
		for i := range a {
			if a[i].Evidence.Commit != r[i].Evidence.Commit || a[i].Value != r[i].Value || a[i].Intent != r[i].Intent {
				t.Errorf("%s[%d]: uninterrupted %s=%s, resumed %s=%s", f, i, a[i].Evidence.Commit, a[i].Value, r[i].Evidence.Commit, r[i].Value)
			}
		}
	}
}

// TestPathsDecideWhatIsRead: test data is not the repository's infrastructure by default; the
// policy's paths narrow or widen that, and an index built with other paths is rebuilt.
func TestPathsDecideWhatIsRead(t *testing.T) {
	r := newGitRepo(t)
	r.write("k8s/prod/web.yaml", deployment("prod", "web", 3, "1.0"))
	r.write("tools/testdata/web.yaml", deployment("test", "web", 1, "0.1"))
	r.commit("Dana Okafor", "dana@parley.example", "Initial\n")
	testAddr := "k8s:apps/Deployment/test/web#/spec/replicas"
	path := filepath.Join(t.TempDir(), "ledger.db")

	def := openLedgerAt(t, r.dir, path)
	update(t, def, "main")
	if h, _ := def.History(mustField(t, testAddr)); len(h) != 0 {
		t.Errorf("test data read by default: %v", h)
	}
	if h, _ := def.History(mustField(t, replicasAddr)); len(h) != 1 {
		t.Errorf("the manifest was not read: %v", h)
	}
	def.Close()

	all, err := ledger.Open(r.dir, ledger.Options{Path: path, Paths: core.PathFilter{Exclude: []string{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	stats, err := all.Update(context.Background(), "main")
	if err != nil || !stats.PathsChanged || stats.Commits != 1 {
		t.Fatalf("update with other paths: %+v %v; want the branch rebuilt", stats, err)
	}
	if h, _ := all.History(mustField(t, testAddr)); len(h) != 1 {
		t.Errorf("exclude = [] must read test data: %v", h)
	}
	if stats, err := all.Update(context.Background(), "main"); err != nil || stats.PathsChanged || stats.Commits != 0 {
		t.Errorf("same paths again: %+v %v; want nothing to do", stats, err)
	}
}

// FileIDAt names the blob FileAt reads, by the tree entry, and moves with the branch; a missing
// branch or file, or a directory, is not found.
func TestFileIDAtNamesTheBlobFileAtReads(t *testing.T) {
	r := newGitRepo(t)
	r.write("infra/kafka/main.tf", asg(6))
	r.commit("Dana Okafor", "dana@parley.example", "Initial\n")
	l, err := ledger.Open(r.dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	id, ok, err := l.FileIDAt("main", "infra/kafka/main.tf")
	if want := r.git("rev-parse", "main:infra/kafka/main.tf"); err != nil || !ok || id != want {
		t.Fatalf("FileIDAt main: %q, %v, %v; want %s", id, ok, err, want)
	}
	for _, c := range []struct{ branch, path string }{{"main", "infra/kafka/other.tf"}, {"main", "infra/kafka"}, {"main", "nowhere/x.tf"}, {"gone", "infra/kafka/main.tf"}} {
		if id, ok, err := l.FileIDAt(c.branch, c.path); err != nil || ok {
			t.Errorf("FileIDAt %s:%s: %q, %v, %v; want not found", c.branch, c.path, id, ok, err)
		}
	}
	r.write("infra/kafka/main.tf", asg(9))
	r.commit("Bob Chen", "bob@parley.example", "More\n\nIntent: performance\n")
	moved, ok, err := l.FileIDAt("main", "infra/kafka/main.tf")
	if want := r.git("rev-parse", "main:infra/kafka/main.tf"); err != nil || !ok || moved != want || moved == id {
		t.Errorf("FileIDAt after main moved: %q, %v, %v; want %s, not %s", moved, ok, err, want, id)
	}
}
