package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/policy/arbiter"
	"github.com/parleyhq/parley/reconcile/driftstate"
	"github.com/parleyhq/parley/reconcile/events"
	"github.com/parleyhq/parley/reconcile/gitops"
)

// GitState is what the reconciler reads of Git's claims: the ledger of the default branch.
type GitState interface {
	Current(f core.Field) (core.Claim, bool, error)
	History(f core.Field) ([]core.Claim, error)
	Fields(p core.FieldPattern) ([]core.Field, error)
}

// State is the durable memory the reconciler keeps; driftstate.DB implements it.
type State interface {
	Fresh(ctx context.Context, ids []string) ([]string, error)
	Apply(ctx context.Context, b driftstate.Batch) error
	Standing(ctx context.Context, f core.Field) ([]core.Claim, error)
	History(ctx context.Context, f core.Field, since time.Time) ([]core.Claim, error)
	Last(ctx context.Context, f core.Field) (driftstate.Record, bool, error)
	// Version is a field's write count, for the compare-and-swap that lets proposals be judged
	// outside the lock (driftstate.Batch.Expect).
	Version(ctx context.Context, f core.Field) (int64, error)
}

// Writer lands one change in Git. It must be idempotent: landing a change whose edit finds nothing
// to do commits nothing and reports Committed false.
type Writer interface {
	Write(ctx context.Context, c Change) (Landed, error)
}

// Landed says what a Writer did.
type Landed struct {
	Committed bool
	Commit    string
	Branch    string
	PR        int // the pull request carrying the commit, in pull-request mode
	// ClosedPR is true when the commit left the pull request with nothing to change, so it was
	// closed (a yield that ended before its gate was merged).
	ClosedPR bool
}

// Snapshot is the default branch a batch is judged against.
type Snapshot struct {
	// Files holds the branch's YAML and Terraform files (repository-relative slash paths).
	Files  map[string][]byte
	Git    GitState
	Policy *policy.Policy
	Head   string // the commit the files and ledger were read at, for logs
	// HeadTime is that commit's time: when Git last said anything, as far as a value Git holds but
	// no ledger entry dates (a chart's rendering) goes.
	HeadTime time.Time
	// Origin is the repository's own URL (its origin remote), which tells a GitOps source reading
	// this repository from one reading another (gitops.DiscoverFrom); "" when unknown.
	Origin string
	// Helm renders the charts in Files for discovery; nil renders them in this process
	// (gitops.InProcess), which nothing stops: the App gives a gitops.RenderProcess, which also
	// builds the kustomizations in Files (for discovery and adoption) under the same budgets.
	Helm gitops.HelmRenderer

	derive *derived // what is computed from Files, shared while the commit is the same; may be nil
}

// Reconciler turns batches of events into verdicts and Git changes. Safe for concurrent use:
// batches are judged one at a time, so two batches touching one field cannot race each other's
// gate commits. Proposals (Propose, ProposeIf) and Explain do not take that turn, since a batch
// holds it across its Git writes; they and the batches record under a compare-and-swap on each
// field's state version instead (ProposeIf says why).
type Reconciler struct {
	State State
	// Writer lands changes; nil plans them without writing.
	Writer Writer
	// PullRequestBranches says the Writer lands changes on per-field pull request branches
	// (ModePullRequest): a verdict that resumes Git then also removes a gate still waiting on the
	// field's unmerged branch.
	PullRequestBranches bool
	// Memo, when set, keeps the fields' drift state in memory for proposals and admission reviews
	// (ProposeIf); nil reads it for each judgement. It needs a State that lists claims
	// (driftstate.DB, driftstate.Group); with another it is not used.
	Memo *FieldMemo
	// Now defaults to time.Now. Verdicts are judged at Now, not at the events' times: an event that
	// arrives late is judged with what is known when it arrives.
	Now func() time.Time
	Log *slog.Logger

	mu sync.Mutex
}

// Result is what happened to one field.
type Result struct {
	Verdict core.Verdict
	Change  *Change // the planned change; nil when the verdict writes nothing
	Landed  *Landed // what the Writer did; nil when nothing was written
	// Note says why nothing was written, in words for people.
	Note string
	// Evidence lists the source/event-ID pairs behind this judgement (empty for a timer).
	Evidence []string
	// Proposal is the proposal the change carries out, when its actor asked first (Propose).
	Proposal string
}

// Report is what one batch or recheck did.
type Report struct {
	Results    []Result
	Duplicates int            // events taken in before, left out
	Ignored    map[string]int // the decoder's counts, by reason
	Reverts    []events.Revert
	OutOfSync  []events.OutOfSync
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC()
	}
	return time.Now().UTC()
}

func (r *Reconciler) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.New(slog.DiscardHandler)
}

// eventKey is how the state names an event: its source and the source's own ID.
func eventKey(source, id string) string { return source + "/" + id }

// Ingest judges a decoded batch against snap. Events taken in before (by ID) are left out; the
// rest become claims, every touched field is judged, and the resulting changes are planned and,
// with a Writer, landed. The claims, verdicts and timers are recorded only once every change
// landed, so an error leaves the batch to be taken in again (changes are idempotent).
func (r *Reconciler) Ingest(ctx context.Context, snap Snapshot, b events.Batch) (Report, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if snap.Policy == nil {
		return Report{}, errors.New("reconcile: no policy")
	}
	now := r.now()
	rep := Report{Ignored: b.Ignored}

	// Per-event deduplication across batches: the delivery store only knows whole batches.
	var ids []string
	source := batchSource(b)
	for _, id := range b.EventIDs {
		ids = append(ids, eventKey(source, id))
	}
	fresh, err := r.State.Fresh(ctx, ids)
	if err != nil {
		return rep, err
	}
	if len(fresh) < len(ids) {
		keep := map[string]bool{}
		for _, k := range fresh {
			keep[strings.TrimPrefix(k, source+"/")] = true
		}
		rep.Duplicates = len(ids) - len(fresh)
		b = onlyEvents(b, keep)
	}
	rep.Reverts, rep.OutOfSync = b.Reverts, b.OutOfSync

	pol := snap.Policy
	name := func(id core.Identity) string {
		if a := pol.ResolveActor(id); a != nil {
			return a.Name
		}
		return ""
	}
	claims0 := events.Claims(b, name, snap.GitValue)
	gated := gateIndex(snap.Files)
	// A GitOps revert put Git's version back over the live changes on an object: their claims end,
	// except on fields Parley gated (the revert did not touch them, or the gate is not synced yet).
	var closes []driftstate.Close
	for _, rv := range b.Reverts {
		except := map[core.Field]bool{}
		for f := range gated {
			if sameObject(f, rv.Object, rv.GroupUnknown) {
				except[f] = true
			}
		}
		closes = append(closes, driftstate.Close{Object: rv.Object, Before: rv.At,
			Why: fmt.Sprintf("%s %s it at %s (%s)", rv.Controller, rv.Action, rv.At.Format(time.RFC3339), rv.Revision), Except: except})
	}
	var fields []core.Field
	for _, c := range claims0 {
		if !slices.Contains(fields, c.Field) {
			fields = append(fields, c.Field)
		}
	}
	sort.Slice(fields, func(i, j int) bool { return fields[i].String() < fields[j].String() })
	pl := r.planner(snap, gated)
	// Judged again, from the standing claims on, when a proposal recorded on one of the fields
	// between this judgement and its record: the verdict must see an accepted proposal. The Git
	// changes already landed are landed again, which does nothing (Writer is idempotent), or
	// changes what the new verdict changes.
	for attempt := 1; ; attempt++ {
		expect, err := r.versions(ctx, fields) // before the standing claims: see ProposeIf
		if err != nil {
			return rep, err
		}
		claims := slices.Clone(claims0)
		// A change its actor proposed first carries the intent, motivation and expiry it declared
		// then: it is the claimed change, not a surprise.
		proposals := map[core.Field]string{}
		standingOf := map[core.Field][]core.Claim{}
		for _, c := range claims {
			if _, ok := standingOf[c.Field]; !ok {
				st, err := r.State.Standing(ctx, c.Field)
				if err != nil {
					return rep, err
				}
				standingOf[c.Field] = st
			}
		}
		for i := range claims {
			if ids := asProposed(standingOf[claims[i].Field], claims[i:i+1], now); ids[0] != "" {
				proposals[claims[i].Field] = ids[0]
			}
		}
		applyActorDefaults(pol, claims)
		byField := map[core.Field][]core.Claim{}
		for _, c := range claims {
			byField[c.Field] = append(byField[c.Field], c)
		}
		batch := driftstate.Batch{Events: fresh, Claims: claims, Closes: closes, At: now, Expect: expect}
		rep.Results = nil
		err = r.judgeFields(ctx, snap, pl, fields, byField, proposals, now, &rep, &batch)
		if errors.Is(err, driftstate.ErrConflict) && attempt < maxJudgements {
			r.log().Info("drift event judged again: a proposal recorded on its fields meanwhile", "attempt", attempt, "error", err.Error())
			continue
		}
		return rep, err
	}
}

// Recheck judges fields again at now with no new claims: the expiry timers call it. A field whose
// yield ended is resumed (its gate removed); one still held keeps its gate and gets a new timer.
func (r *Reconciler) Recheck(ctx context.Context, snap Snapshot, fields []core.Field) (Report, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if snap.Policy == nil {
		return Report{}, errors.New("reconcile: no policy")
	}
	now := r.now()
	pl := r.planner(snap, gateIndex(snap.Files))
	for attempt := 1; ; attempt++ {
		var rep Report
		expect, err := r.versions(ctx, fields)
		if err != nil {
			return rep, err
		}
		batch := driftstate.Batch{At: now, Expect: expect}
		err = r.judgeFields(ctx, snap, pl, fields, nil, nil, now, &rep, &batch)
		if errors.Is(err, driftstate.ErrConflict) && attempt < maxJudgements {
			continue // a proposal recorded on one of the fields meanwhile: judge with it standing
		}
		return rep, err
	}
}

func (r *Reconciler) planner(snap Snapshot, gated map[core.Field][]gateLoc) *planner {
	p := newPlanner(snap, gated)
	p.branches = r.PullRequestBranches
	return p
}

// judgeFields judges each field in order (with its fresh claims, if any), lands the changes,
// and records the verdicts and timers with the rest of the batch in one transaction.
func (r *Reconciler) judgeFields(ctx context.Context, snap Snapshot, pl *planner, fields []core.Field,
	fresh map[core.Field][]core.Claim, proposals map[core.Field]string, now time.Time, rep *Report, batch *driftstate.Batch) error {
	for _, f := range fields {
		var ev []string
		for _, c := range fresh[f] {
			for _, id := range c.Evidence.EventIDs {
				ev = append(ev, eventKey(c.Evidence.Source, id))
			}
		}
		res, err := r.judgeAndLand(ctx, snap, pl, f, fresh[f], ev, now)
		if err != nil {
			return err
		}
		res.Proposal = proposals[f]
		rep.Results = append(rep.Results, res)
		batch.Verdicts = append(batch.Verdicts, record(res, now))
		batch.Timers = append(batch.Timers, timerFor(res.Verdict, now))
	}
	return r.State.Apply(ctx, *batch)
}

func (r *Reconciler) judgeAndLand(ctx context.Context, snap Snapshot, pl *planner, f core.Field, fresh []core.Claim, ev []string, now time.Time) (Result, error) {
	v, err := r.judge(ctx, snap, f, fresh, now)
	if err != nil {
		return Result{}, err
	}
	res := Result{Verdict: v, Evidence: ev}
	res.Change, res.Note = pl.plan(v)
	asking := v.Decision == core.DecisionHold || v.Decision == core.DecisionEscalate ||
		v.Decision == core.DecisionVeto && v.Proposed != nil
	if res.Change != nil && (res.Change.Action == ActionAsk || res.Change.Action == ActionPropose) || !asking {
		last, ok, err := r.State.Last(ctx, f)
		if err != nil {
			return res, err
		}
		asked := ok && (last.Action == string(ActionAsk) || last.Action == string(ActionPropose))
		switch {
		case asked && asking && driftstate.Signature(last.Verdict) == driftstate.Signature(v):
			// Asked already: the same hold restated (every flip), or the same vetoed value again
			// (whose pull request people may have closed: the veto stands), asks no one again.
			res.Change, res.Note = nil, string(v.Decision)+"; people were asked already"
			if last.PR != 0 {
				res.Note = fmt.Sprintf("%s; people were asked on pull request #%d", v.Decision, last.PR)
			} else if last.Branch != "" {
				res.Note = fmt.Sprintf("%s; people were asked on the branch %s", v.Decision, last.Branch)
			}
		case asked && !asking && last.PR != 0:
			if err := r.settle(ctx, last, v); err != nil {
				return res, err
			}
		}
	}
	if res.Change == nil || r.Writer == nil {
		return res, nil
	}
	landed, err := r.Writer.Write(ctx, *res.Change)
	if err != nil {
		return res, fmt.Errorf("%s %s: %w", res.Change.Action, f, err)
	}
	res.Landed = &landed
	if res.Change.Action == ActionPropose {
		res.Note = proposedNote(v, landed)
	} else {
		pl.landed(*res.Change) // a proposal is on its own branch: the base branch's files are unchanged
	}
	r.log().Info("verdict landed in Git", "field", f.String(), "decision", string(v.Decision), "rule", v.Rule,
		"action", string(res.Change.Action), "commit", landed.Commit, "branch", landed.Branch, "pr", landed.PR, "committed", landed.Committed)
	return res, nil
}

// proposedNote says where a veto was put to people, and who was asked.
func proposedNote(v core.Verdict, l Landed) string {
	who := "asking nobody: the policy names no one"
	if len(v.Ask) > 0 {
		who = "asking " + strings.Join(v.Ask, ", ")
	}
	switch {
	case l.PR != 0:
		return fmt.Sprintf("vetoed; the value is proposed on pull request #%d (branch %s), %s", l.PR, l.Branch, who)
	case l.Branch != "":
		return fmt.Sprintf("vetoed; the value is proposed on the branch %s (push it and open a pull request), %s", l.Branch, who)
	}
	return "vetoed; the veto is put to people, but this writer opens no pull request: the verdict is recorded, " + who
}

// Settler is a Writer that can tell a field's pull request how a question put to people ended.
type Settler interface {
	Settle(ctx context.Context, branch, comment string) (pr int, err error)
}

// settle tells the pull request of a hold or escalation that the field is decided, and how.
func (r *Reconciler) settle(ctx context.Context, asked driftstate.Record, v core.Verdict) error {
	s, ok := r.Writer.(Settler)
	if !ok {
		return nil
	}
	comment := fmt.Sprintf("The %s on %s is over: %s", asked.Verdict.Decision, v.Field, resultSentence(v))
	if _, err := s.Settle(ctx, asked.Branch, comment); err != nil {
		return fmt.Errorf("settle the pull request #%d of %s: %w", asked.PR, v.Field, err)
	}
	r.log().Info("question on a field settled", "field", v.Field.String(), "pr", asked.PR, "decision", string(v.Decision))
	return nil
}

// judge arbitrates f: the standing live claims (stored ones, with this batch's on top, the latest
// per actor) against Git's claim, with Git's and the live history for oscillation.
func (r *Reconciler) judge(ctx context.Context, snap Snapshot, f core.Field, fresh []core.Claim, now time.Time) (core.Verdict, error) {
	return r.judgeOn(ctx, snap, f, fresh, now, nil)
}

// judgeOn is judge on the field's drift state as a FieldMemo entry holds it; nil reads it.
func (r *Reconciler) judgeOn(ctx context.Context, snap Snapshot, f core.Field, fresh []core.Claim, now time.Time, memo *memoEntry) (core.Verdict, error) {
	since := now.Add(-snap.Policy.Oscillation.Window)
	var standing []core.Claim
	var err error
	if memo != nil {
		standing = memo.standing()
	} else if standing, err = r.State.Standing(ctx, f); err != nil {
		return core.Verdict{}, err
	}
	live := latestPerActor(append(standing, fresh...))
	in := arbiter.Input{Field: f, Live: live, Now: now, Lookup: gitLookup{g: snap.Git, d: snap.derive}, Dependents: snap.dependents(f),
		Owners: func() arbiter.Owners { return snap.owners(f) }}
	if snap.derive != nil {
		in.Conditions = snap.derive // the derived state is the commit's: Lookup reads the same commit
	}
	if c, ok, err := snap.gitClaim(f); err != nil {
		return core.Verdict{}, fmt.Errorf("Git's claim on %s: %w", f, err)
	} else if ok {
		in.Git = &c
	}
	gitHist, err := snap.derive.gitHistory(snap.Git, f)
	if err != nil {
		return core.Verdict{}, fmt.Errorf("history of %s: %w", f, err)
	}
	// Live history matters for oscillation only, which looks back one window.
	var stored []core.Claim
	if memo != nil {
		stored = memo.historySince(since)
	} else if stored, err = r.State.History(ctx, f, since); err != nil {
		return core.Verdict{}, err
	}
	// One slice of the exact size for the three: appending to Git's history grew it twice.
	hist := make([]core.Claim, 0, len(gitHist)+len(stored)+len(fresh))
	hist = append(append(append(hist, gitHist...), stored...), fresh...)
	slices.SortStableFunc(hist, func(a, b core.Claim) int { return a.At.Compare(b.At) })
	in.History = hist
	return snap.derive.decide(snap.Policy, in), nil
}

// latestPerActor keeps each actor's latest claim: a new scale by the HPA replaces its previous one.
func latestPerActor(cs []core.Claim) []core.Claim {
	idx := map[string]int{}
	var out []core.Claim
	for _, c := range cs {
		k := c.Actor.String()
		if i, ok := idx[k]; ok {
			if !c.At.Before(out[i].At) {
				out[i] = c
			}
			continue
		}
		idx[k] = len(out)
		out = append(out, c)
	}
	return out
}

// applyActorDefaults gives an undeclared claim its actor's default motivation, so that an HPA
// that says nothing still scales "for traffic" if the policy says that is why it acts.
func applyActorDefaults(p *policy.Policy, cs []core.Claim) {
	for i := range cs {
		c := &cs[i]
		if c.Actor.Name == "" || !c.Motivation.IsZero() {
			continue
		}
		if a := p.Actor(c.Actor.Name); a != nil && a.Motivation != "" {
			c.Motivation = core.Motivation{Kind: a.Motivation}
		}
	}
}

// gitLookup answers the policy's git() and git_values() from the snapshot's ledger.
type gitLookup struct {
	g GitState
	d *derived // the commit's memo; nil keeps nothing
}

func (l gitLookup) GitValue(f core.Field) (core.Value, bool, error) {
	c, ok, err := l.d.gitCurrent(l.g, f)
	if err != nil || !ok {
		return core.Value{}, false, err
	}
	return c.Value, !c.Value.Absent(), nil
}

// GitFields lists the fields Git sets that match p, kept per commit: a pattern such as the demo
// policy's owner_when (every HPA's scaleTargetRef in the namespace) walks every address of the
// ledger, and at admission rates each judgement of a replicas field asked it again.
func (l gitLookup) GitFields(p core.FieldPattern) ([]core.Field, error) {
	if l.d == nil {
		return l.g.Fields(p)
	}
	l.d.mu.Lock()
	fs, ok := l.d.gitFields[p.String()]
	l.d.mu.Unlock()
	if ok {
		return slices.Clone(fs), nil
	}
	fs, err := l.g.Fields(p)
	if err != nil {
		return nil, err
	}
	l.d.mu.Lock()
	if l.d.gitFields == nil {
		l.d.gitFields = map[string][]core.Field{}
	}
	l.d.gitFields[p.String()] = fs
	l.d.mu.Unlock()
	return slices.Clone(fs), nil
}

func batchSource(b events.Batch) string {
	for _, o := range b.Observations {
		return o.Source
	}
	for _, rv := range b.Reverts {
		return rv.Source
	}
	for _, o := range b.OutOfSync {
		return o.Source
	}
	return "unknown"
}

func onlyEvents(b events.Batch, keep map[string]bool) events.Batch {
	out := events.Batch{Ignored: b.Ignored, Latest: b.Latest}
	for _, id := range b.EventIDs {
		if keep[id] {
			out.EventIDs = append(out.EventIDs, id)
		}
	}
	for _, o := range b.Observations {
		if keep[o.EventID] {
			out.Observations = append(out.Observations, o)
		}
	}
	for _, rv := range b.Reverts {
		if keep[rv.EventID] {
			out.Reverts = append(out.Reverts, rv)
		}
	}
	for _, o := range b.OutOfSync {
		if keep[o.EventID] {
			out.OutOfSync = append(out.OutOfSync, o)
		}
	}
	return out
}

// sameObject reports whether field f is on obj; groupUnknown matches on kind, namespace and name
// (Flux names only the kind of a custom resource).
func sameObject(f, obj core.Field, groupUnknown bool) bool {
	a, b := f.Object(), obj.Object()
	if groupUnknown {
		a.Group, b.Group = "", ""
	}
	return a == b
}

func record(res Result, now time.Time) driftstate.Record {
	rec := driftstate.Record{Verdict: res.Verdict, At: now, Evidence: res.Evidence, Note: res.Note}
	if res.Proposal != "" {
		rec.Evidence = append(slices.Clip(rec.Evidence), eventKey(EvidenceProposal, res.Proposal))
		rec.Note = strings.TrimSuffix("the change proposal "+res.Proposal+" asked for; "+rec.Note, "; ")
	}
	if res.Change != nil {
		rec.Action = string(res.Change.Action)
	}
	if res.Landed != nil {
		rec.Branch, rec.PR = res.Landed.Branch, res.Landed.PR
		if res.Landed.Committed {
			rec.Commit = res.Landed.Commit
		}
		if res.Landed.ClosedPR {
			rec.Note = fmt.Sprintf("the gate was still waiting on pull request #%d: removed there, and the pull request closed", res.Landed.PR)
		}
	}
	if len(rec.Evidence) == 0 {
		rec.Evidence = []string{"timer/" + now.Format(time.RFC3339)}
	}
	return rec
}

// timerFor is when a field must be judged again: the end of a yield or hold, or the arbiter's
// recheck time (a claim expiring, an escalation falling back); zero clears the timer. A time that
// is not after now (which the arbiter should never give) is put a minute ahead, so that a timer
// loop can never spin on a field that stays due.
// TimerDue is when the timer recording v sets on its field comes due, as the verdict says (a
// yield's or hold's end, a recheck); ok is false when it sets none (it clears the field's timer).
// A time already past when it is recorded is set a minute on, so it comes due no earlier than
// this says.
func TimerDue(v core.Verdict) (due time.Time, ok bool) {
	t := timerFor(v, time.Time{})
	return t.Due, !t.Due.IsZero()
}

func timerFor(v core.Verdict, now time.Time) driftstate.Timer {
	due := v.Recheck
	if !v.Until.IsZero() && (due.IsZero() || v.Until.Before(due)) {
		due = v.Until
	}
	if due.IsZero() {
		return driftstate.Timer{Field: v.Field}
	}
	if !due.After(now) {
		due = now.Add(time.Minute)
	}
	return driftstate.Timer{Field: v.Field, Due: due, Why: "recheck " + string(v.Decision) + " (" + v.Rule + ")"}
}

// Fields returns the fields of the results, for logs and tests.
func (rep Report) Fields() []string {
	var out []string
	for _, r := range rep.Results {
		out = append(out, r.Verdict.Field.String())
	}
	return slices.Clip(out)
}
