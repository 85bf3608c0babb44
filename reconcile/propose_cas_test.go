package reconcile

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/events"
)

// meetingState is the real drift state with one rendezvous: the first two judgements that read a
// field's standing claims wait for each other there, so that both read the field before either
// records, the interleaving a lock-free judgement must survive. A caller left alone (the other
// never comes, as when judgements are serialised) goes on after patience.
type meetingState struct {
	State
	field    core.Field
	patience time.Duration

	mu     sync.Mutex
	come   int
	bothIn chan struct{}
}

func (s *meetingState) Standing(ctx context.Context, f core.Field) ([]core.Claim, error) {
	st, err := s.State.Standing(ctx, f)
	if f != s.field {
		return st, err
	}
	s.mu.Lock()
	s.come++
	n := s.come
	if n == 2 {
		close(s.bothIn)
	}
	s.mu.Unlock()
	if n <= 2 {
		select {
		case <-s.bothIn:
		case <-time.After(s.patience):
		}
	}
	return st, err
}

// Two actors propose the Kafka consumers' capacity at once, for performance. Either would be
// accepted alone (performance outranks Git's cost), but not both: between two performance claims
// no rule and no rank decides, so the second is escalated. Both judgements read the field before either
// records (meetingState); the compare-and-swap on the field's version refuses the second record,
// which is judged again with the first standing, and refused. Exactly one is accepted, and only
// its claim stands.
func TestConcurrentProposalsOnOneFieldAcceptOne(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	meet := &meetingState{State: e.state, field: capacity, patience: 10 * time.Second, bothIn: make(chan struct{})}
	e.rec.State = meet
	snap := e.snapshot()
	proposals := []struct {
		id    string
		actor core.Identity
		value string
	}{
		{"p-oncall", core.Identity{Source: core.SourceAWSPrincipal, ID: oncallARN}, "12"},
		{"p-agent", core.Identity{Source: core.SourceAWSPrincipal, ID: agentRole}, "14"},
	}
	got := make([][]Proposed, len(proposals))
	errs := make([]error, len(proposals))
	var wg sync.WaitGroup
	for i, p := range proposals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = e.rec.Propose(ctx, snap, p.id, []core.Claim{{Field: capacity, Actor: core.Actor{Identity: p.actor},
				Value: core.CanonicalJSONValue(p.value), Intent: "performance", Expires: t0.Add(time.Hour)}})
		}()
	}
	wg.Wait()
	accepted := 0
	for i := range proposals {
		if errs[i] != nil {
			t.Fatalf("%s: %v", proposals[i].id, errs[i])
		}
		if len(got[i]) != 1 {
			t.Fatalf("%s: %+v", proposals[i].id, got[i])
		}
		if got[i][0].Accepted {
			accepted++
		} else if got[i][0].Holder == nil && got[i][0].Verdict.Decision != core.DecisionEscalate {
			t.Errorf("%s refused without a holder or an escalation: %+v", proposals[i].id, got[i][0].Verdict)
		}
	}
	if accepted != 1 {
		t.Fatalf("%d of two conflicting proposals accepted: %+v / %+v", accepted, got[0][0].Verdict, got[1][0].Verdict)
	}
	st, err := e.state.Standing(ctx, capacity)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 {
		t.Fatalf("standing claims on %s: %+v", capacity, st)
	}
}

// Each proposal alone is accepted, and the second after the first is not: the premise of the
// test above, so that it fails for the race and not for the policy.
func TestConflictingProposalsInTurnAcceptTheFirst(t *testing.T) {
	ctx := context.Background()
	for _, order := range [][2]string{{oncallARN, agentRole}, {agentRole, oncallARN}} {
		e := newEnv(t)
		for i, who := range order {
			got, err := e.rec.Propose(ctx, e.snapshot(), "p-"+who, []core.Claim{{Field: capacity, Actor: core.Actor{Identity: core.Identity{Source: core.SourceAWSPrincipal, ID: who}},
				Value: core.CanonicalJSONValue(strconv.Itoa(12 + 2*i)), Intent: "performance", Expires: t0.Add(time.Hour)}})
			if err != nil {
				t.Fatal(err)
			}
			if got[0].Accepted != (i == 0) {
				t.Fatalf("%s, %d in turn: accepted %v: %+v", who, i+1, got[0].Accepted, got[0].Verdict)
			}
		}
	}
}

// heldWriter lands changes with the real writer after the first Write has waited for release:
// a push that GitHub is slow to take.
type heldWriter struct {
	Writer
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (w *heldWriter) Write(ctx context.Context, c Change) (Landed, error) {
	w.once.Do(func() { close(w.entered); <-w.release })
	return w.Writer.Write(ctx, c)
}

// A proposal accepted while a drift event lands its change in Git is seen by that event's verdict:
// the event's record, judged before the proposal stood, fails its compare-and-swap and the field
// is judged again with the proposal standing. Here the Kafka agent's change (performance, over
// Git's cost) is being landed when on-call's incident proposal is accepted: the verdict recorded
// is on-call's, not the agent's.
func TestDriftEventVerdictSeesAProposalAcceptedDuringItsPush(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	held := &heldWriter{Writer: e.rec.Writer, entered: make(chan struct{}), release: make(chan struct{})}
	e.rec.Writer = held
	snap := e.snapshot()
	b, err := Decode(events.SourceCloudTrail, trail("ct-1", agentRole, "autoscaling.amazonaws.com", "SetDesiredCapacity", t0,
		`{"autoScalingGroupName":"kafka-consumer","desiredCapacity":14}`), snap.Files)
	if err != nil {
		t.Fatal(err)
	}
	type ingested struct {
		rep Report
		err error
	}
	done := make(chan ingested, 1)
	go func() { rep, err := e.rec.Ingest(ctx, snap, b); done <- ingested{rep, err} }()
	select {
	case <-held.entered:
	case r := <-done:
		t.Fatalf("the drift event wrote nothing to Git: %+v %v", r.rep, r.err)
	}
	got, err := e.rec.Propose(ctx, snap, "p-incident", []core.Claim{{Field: capacity, Actor: core.Actor{Identity: core.Identity{Source: core.SourceAWSPrincipal, ID: oncallARN}},
		Value: core.CanonicalJSONValue("12"), Intent: "availability", Motivation: core.Motivation{Kind: "incident", Ref: "INC-9"}, Expires: t0.Add(time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	if !got[0].Accepted {
		t.Fatalf("on-call's incident proposal during the push: %+v", got[0].Verdict)
	}
	close(held.release)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	v := only(t, r.rep, capacity).Verdict
	if v.Winner == nil || v.Winner.Actor.Name != "oncall" {
		t.Fatalf("the drift event's verdict did not see the accepted proposal: %+v", v)
	}
	last, ok, err := e.state.Last(ctx, capacity)
	if err != nil || !ok || last.Verdict.Winner == nil || last.Verdict.Winner.Actor.Name != "oncall" {
		t.Fatalf("the verdict recorded: %+v %v %v", last.Verdict, ok, err)
	}
}
