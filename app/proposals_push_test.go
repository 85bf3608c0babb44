package app

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/driftstate"
)

// blockedRemote serves the drift setup's bare repository over git http-backend on loopback, with a
// pre-receive hook that holds every push until release is called: a GitHub that is slow to take
// a push. entered is closed when the first push reaches the hook.
type blockedRemote struct {
	entered chan struct{}
	release func()
}

func blockPushes(t *testing.T, gh interface {
	SetRepository(string, map[string]any)
}, bare string) *blockedRemote {
	t.Helper()
	gate := t.TempDir()
	hook := "#!/bin/sh\n: > '" + filepath.Join(gate, "entered") + "'\nwhile [ ! -e '" + filepath.Join(gate, "release") + "' ]; do sleep 0.02; done\n"
	if err := os.WriteFile(filepath.Join(bare, "hooks", "pre-receive"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	gh.SetRepository("acme/infra", map[string]any{"clone_url": gittest.ServeHTTP(t, bare, true), "default_branch": "main"})
	b := &blockedRemote{entered: make(chan struct{})}
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() { // owned by this helper: it ends when a push enters or the test ends
		defer close(watched)
		for {
			if _, err := os.Stat(filepath.Join(gate, "entered")); err == nil {
				close(b.entered)
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	released := false
	b.release = func() {
		if !released {
			released = true
			_ = os.WriteFile(filepath.Join(gate, "release"), nil, 0o644)
		}
	}
	t.Cleanup(func() { b.release(); close(stop); <-watched })
	return b
}

// A proposal and an admission review are answered while a drift event's push to the Git remote is
// held (a pre-receive hook on a real git http-backend that waits to be released): they are judged
// on the proposals' view and the standing claims, and recorded by compare-and-swap, not behind the
// lock the drift event holds across its push. The drift event then completes, its gates pushed.
func TestProposalIsAnsweredWhileADriftEventPushes(t *testing.T) {
	d, gh, remote, _ := driftSetup(t, reconcile.ModeDirect)
	ctx := context.Background()
	block := blockPushes(t, gh, remote.Dir)
	capacity, err := core.ParseField(capacityField)
	if err != nil {
		t.Fatal(err)
	}
	oncall := core.Actor{Identity: core.Identity{Source: core.SourceAWSPrincipal, ID: "arn:aws:sts::123456789012:assumed-role/oncall/alice"}}
	claim := func(v string) []core.Claim {
		return []core.Claim{{Field: capacity, Actor: oncall, Value: core.CanonicalJSONValue(v), Intent: "performance",
			Motivation: core.Motivation{Kind: "incident", Ref: "INC-7"}, Expires: d.now().Add(time.Hour)}}
	}
	// The proposals' view is loaded first (the first proposal clones the repository).
	if _, _, err := d.Propose(ctx, "", time.Hour, "p-warm", claim("10")); err != nil {
		t.Fatal(err)
	}

	handled := make(chan error, 1)
	go func() { handled <- d.Handle(ctx, auditDelivery(t, "batch-1")) }()
	select {
	case <-block.entered:
	case err := <-handled:
		t.Fatalf("the drift event finished without pushing: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the drift event's push never reached the remote")
	}

	answered := make(chan error, 1)
	var got []reconcile.Proposed
	go func() {
		var err error
		_, got, err = d.Propose(ctx, "", time.Hour, "p-during-push", claim("12"))
		if err == nil {
			err = d.admit(ctx, "", time.Hour, "review-during-push", func(reconcile.Snapshot) []core.Claim { return claim("13") },
				func([]reconcile.Proposed) bool { return true })
		}
		answered <- err
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		block.release()
		<-handled
		t.Fatal("the proposal waited behind the drift event's push")
	}
	select {
	case err := <-handled:
		t.Fatalf("the drift event finished while its push was held: %v", err)
	default:
	}
	if len(got) != 1 || !got[0].Accepted {
		t.Fatalf("the proposal during the push: %+v", got)
	}
	block.release()
	if err := <-handled; err != nil {
		t.Fatal(err)
	}
	if out := remote.Run("log", "-1", "--format=%s", "main"); out == "" {
		t.Fatal("nothing pushed")
	}
	rd, err := d.repo(ctx, "acme/infra", "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := rd.state.Standing(ctx, capacity)
	if err != nil || len(st) != 1 || st[0].Value.String() != "13" {
		t.Fatalf("standing on %s after the review: %+v %v", capacity, st, err)
	}
}

// writeFirst is the repository's drift state with, before the first batch that expects a
// version of field, another write on field (a verdict recorded by someone else): that batch's
// compare-and-swap then fails, and its review is judged again.
type writeFirst struct {
	reconcile.State
	field core.Field
	done  bool
}

func (w *writeFirst) Apply(ctx context.Context, b driftstate.Batch) error {
	if _, ok := b.Expect[w.field]; ok && !w.done {
		w.done = true
		if err := w.State.Apply(ctx, driftstate.Batch{At: b.At, Verdicts: []driftstate.Record{{Verdict: core.Verdict{Field: w.field, Decision: core.DecisionYield},
			At: b.At, Evidence: []string{"test/elsewhere"}}}}); err != nil {
			return err
		}
	}
	return w.State.Apply(ctx, b)
}

// A review judged again because another write landed on its fields between its judgement and its
// record is answered from the last judgement alone: in warn mode the refused field's warning is
// given once, not once per judgement, and the accepted field's claim is recorded once.
func TestAdmissionJudgedAgainAnswersOnce(t *testing.T) {
	srv, _, d := admissionSetup(t, "warn")
	ctx := context.Background()
	rd, err := d.repo(ctx, "acme/infra", "")
	if err != nil {
		t.Fatal(err)
	}
	ws := &writeFirst{State: rd.rec.State, field: webImage}
	rd.rec.State = ws
	dep := `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"prod","resourceVersion":"41","annotations":{%s}},` +
		`"spec":{"replicas":%d,"template":{"spec":{"containers":[{"name":"web","image":"registry.example.com/shop/web:%s"}]}}}}`
	body := reviewOf("again-1", "alice@parley.example", "", fmt.Sprintf(dep, hotfix, 2, "1.41.4-hotfix"), fmt.Sprintf(dep, "", 3, "1.41.0"), false)
	code, resp, raw := admit(t, srv, admissionToken, body)
	if !ws.done {
		t.Fatal("the review never recorded: nothing was judged again")
	}
	if code != http.StatusOK || !resp.Allowed || len(resp.Warnings) != 1 {
		t.Fatalf("a review judged twice: %d %s", code, raw)
	}
	if st := standing(t, d, webImage); len(st) != 1 || st[0].Actor.Name != "oncall" {
		t.Fatalf("the accepted image: %+v", st)
	}
}
