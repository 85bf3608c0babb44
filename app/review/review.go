package review

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/parleyhq/parley/app/report"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/core/fielddiff"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/policy/arbiter"
	"github.com/parleyhq/parley/trailers"
)

// PullRequest describes the pull request being judged.
type PullRequest struct {
	Number  int
	BaseSHA string // the base branch's commit
	// MergeBaseSHA is the commit the pull request's changes are measured from: the merge base of
	// base and head, as GitHub's "Files changed" shows them. Empty means BaseSHA.
	MergeBaseSHA string
	HeadSHA      string
	Title        string
	Body         string
	Labels       []string
	Author       core.Identity // the GitHub user who opened it
	Updated      time.Time     // when the head last changed: the time of the PR's claims
	// Commands are claims people made on the pull request (/parley claim, /parley yield): each is
	// judged on its field, beside the pull request's own claims, whether or not the pull request
	// changes that field.
	Commands []core.Claim
	// Budget bounds what the judgement reads: a file, a file's changed fields, the pull request's
	// changed fields and a value over it are problems, not judged. Zero: core.DefaultBudget.
	Budget core.Budget
	// Parsed, if not nil, remembers what each blob the judgement parses gave, for the next
	// judgement: the long-lived judge (the App's PullRequests) owns it. Nil: every file is read and
	// parsed.
	Parsed *Parsed
	// Contributors are who besides Author made the pull request what it is: who pushed to it,
	// added its intent/ and motivation/ labels, edited its body. Its claims are judged as Author
	// and as each of them, and the least favourable verdict stands: nobody gains trust by riding
	// on someone else's pull request.
	Contributors []Contributor
}

// Contributor is someone who acted on a pull request, and what they did.
type Contributor struct {
	Identity core.Identity
	What     string // "pushed to the branch", "added label motivation/incident", ...
	// Files limits the contributor to the fields of these files: a commit's author is judged on
	// what the commit touched (GitSource.CommitAuthors). Nil: every field of the pull request.
	Files []string
}

// Commit is one commit of the pull request.
type Commit struct {
	SHA     string
	Message string
	Author  core.Identity
	Time    time.Time
}

// FileChange is one file the pull request changes.
type FileChange struct {
	Path         string
	PreviousPath string // for renames; "" otherwise
	Status       string // "added", "removed", "modified", "renamed", ...
}

// Source reads a pull request's commits and files. Implementations may cache; Evaluate calls each
// method at most once per file and revision.
type Source interface {
	Commits(ctx context.Context) ([]Commit, error)
	Files(ctx context.Context) ([]FileChange, error)
	// Content returns a file at a commit; ok is false when the file does not exist there.
	Content(ctx context.Context, sha, path string) (data []byte, ok bool, err error)
}

// sizer is a Source that knows a file's size before reading it (GitSource does, from the blob's
// header): a file over the budget is then never read into memory.
type sizer interface {
	Size(ctx context.Context, sha, path string) (size int64, ok bool, err error)
}

// dependencies is a Source that knows what reads a field (GitSource does): a claim's dependents
// reach the policy as claim.dependents and are listed in the explanation. A Source without it
// judges every claim with no dependents.
type dependencies interface {
	Dependents(f core.Field) ([]core.Dependent, error)
}

// parsedUser is a Source that can remember what it builds from a whole tree (GitSource's
// dependency graph) in the judge's Parsed.
type parsedUser interface {
	useParsed(m *Parsed)
}

// GitState is the base branch's ledger: what Git claims now and claimed before.
type GitState interface {
	Current(f core.Field) (core.Claim, bool, error)
	History(f core.Field) ([]core.Claim, error)
	Fields(p core.FieldPattern) ([]core.Field, error)
}

// LiveState answers the live claims on a field: changes made outside Git that still stand, and
// claims made by commands. A nil LiveState means none.
type LiveState interface {
	Live(f core.Field, now time.Time) ([]core.Claim, error)
}

// Result is the judgement of one pull request.
type Result struct {
	Verdicts []core.Verdict // one per field the pull request claims, sorted by field
	Claims   []core.Claim   // the pull request's own claims
	// Declaration is the merged intent and motivation the claims carry, and where each came from.
	Declaration core.Declaration
	Sources     []string // e.g. "intent from label intent/security"
	// Problems are things a person should fix: malformed trailers (with commit and line), files that
	// do not parse. They never stop the evaluation.
	Problems []string
	// Unjudged is true when something the pull request changes was not judged: a file or a YAML
	// document that does not read (a parse error, a nesting, alias or node budget, a template), or
	// one over the budget (a file too large, too many fields, a value too long). The verdicts do
	// not cover the whole change, so they cannot pass it alone (Conclusion).
	Unjudged bool
	// Outcomes say what each verdict (same index) means for the pull request's own claim on the
	// field: whether its change may happen (report.OutcomeOf; a deferral's Until is its freeze's end).
	Outcomes []report.Outcome
}

// Conclusion is the check run conclusion for the result (report.Conclusion): it passes only when
// the pull request's own change wins on every field it claims, and never when part of the change
// was not judged, since hiding a change where Parley cannot read it must not be a way around a
// veto: people look (action_required), and a veto beside it still fails.
func (r Result) Conclusion() string {
	return report.Conclusion(r.Outcomes, r.Unjudged)
}

// OutcomesByField is Outcomes keyed by field, as report.Input takes them.
func (r Result) OutcomesByField() map[core.Field]report.Outcome {
	m := make(map[core.Field]report.Outcome, len(r.Verdicts))
	for i, v := range r.Verdicts {
		if i < len(r.Outcomes) {
			m[v.Field] = r.Outcomes[i]
		}
	}
	return m
}

// Evaluate judges a pull request under pol (the base branch's policy) at now.
func Evaluate(ctx context.Context, pr PullRequest, src Source, pol *policy.Policy, git GitState, live LiveState, now time.Time) (Result, error) {
	var res Result
	commits, err := src.Commits(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("pull request #%d: list commits: %w", pr.Number, err)
	}
	files, err := src.Files(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("pull request #%d: list files: %w", pr.Number, err)
	}
	decl, explicit := declare(pr, commits, &res)
	res.Declaration = decl

	// Implicit claims: every field the pull request changes, merge base against head. The base
	// tip would count every field the base branch changed since the branch was cut as the pull
	// request wanting the old value back.
	from := pr.MergeBaseSHA
	if from == "" {
		from = pr.BaseSHA
	}
	budget := pr.Budget.WithDefaults()
	changed := map[core.Field]core.Value{}
	fileOf := map[core.Field][]string{} // the file a changed field is in, under its new and old names
	var overPR []string                 // files left out once the pull request's field budget is spent
	for _, fc := range files {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		if !fielddiff.Supported(fc.Path) && (fc.PreviousPath == "" || !fielddiff.Supported(fc.PreviousPath)) {
			continue
		}
		oldPath := fc.Path
		if fc.PreviousPath != "" {
			oldPath = fc.PreviousPath
		}
		if len(changed) >= budget.FieldsPerChange {
			overPR = append(overPR, fc.Path)
			continue
		}
		// The head first: a file the pull request makes too large is named as it is now.
		newSide, big, err := load(ctx, src, pr.Parsed, budget, pr.HeadSHA, fc.Path, fc.Path, fc.Status != "removed")
		if err != nil {
			return Result{}, fmt.Errorf("pull request #%d: read %s at head %s: %w", pr.Number, fc.Path, short(pr.HeadSHA), err)
		}
		if big > 0 {
			res.Problems = append(res.Problems, budget.FileTooLarge(fc.Path, big))
			res.Unjudged = true
			continue
		}
		oldSide, big, err := load(ctx, src, pr.Parsed, budget, from, oldPath, fc.Path, fc.Status != "added")
		if err != nil {
			return Result{}, fmt.Errorf("pull request #%d: read %s at merge base %s: %w", pr.Number, oldPath, short(from), err)
		}
		if big > 0 {
			res.Problems = append(res.Problems, budget.FileTooLarge(oldPath+" (at the merge base)", big))
			res.Unjudged = true
			continue
		}
		changes, err := diff(pr.Parsed, fc.Path, oldSide, newSide)
		if err != nil {
			// What does not read is unjudged, and cannot pass; what reads beside it in the same
			// file (its other YAML documents) is judged all the same, vetoes included. Reading a
			// YAML file's documents one by one needs both sides' bytes, even when the parse of
			// one of them was remembered.
			if isYAML(fc.Path) {
				if err := oldSide.readAll(ctx, src); err != nil {
					return Result{}, fmt.Errorf("pull request #%d: read %s at merge base %s: %w", pr.Number, oldPath, short(from), err)
				}
				if err := newSide.readAll(ctx, src); err != nil {
					return Result{}, fmt.Errorf("pull request #%d: read %s at head %s: %w", pr.Number, fc.Path, short(pr.HeadSHA), err)
				}
			}
			var problems []string
			changes, problems = partialDiff(fc.Path, oldSide.data, newSide.data, err)
			res.Problems = append(res.Problems, problems...)
			res.Unjudged = true
			if len(changes) == 0 {
				continue
			}
		}
		if len(changes) > budget.FieldsPerFile {
			res.Problems = append(res.Problems, budget.TooManyFields(fc.Path, len(changes)))
			res.Unjudged = true
			continue
		}
		if len(changed)+len(changes) > budget.FieldsPerChange {
			overPR = append(overPR, fc.Path)
			continue
		}
		for _, c := range changes {
			if n := len(c.New.JSON()) + len(c.New.Expr()); n > budget.ValueBytes {
				res.Problems = append(res.Problems, budget.ValueTooLarge(c.Field, n))
				res.Unjudged = true
				continue
			}
			changed[c.Field] = c.New
			fileOf[c.Field] = []string{fc.Path, oldPath}
		}
	}
	if len(overPR) > 0 {
		res.Unjudged = true
		res.Problems = append(res.Problems, fmt.Sprintf("the pull request changes more than the %d fields Parley judges in one pull request; not judged: %s",
			budget.FieldsPerChange, strings.Join(overPR, ", ")))
	}
	claims := map[core.Field]core.Claim{}
	for f, v := range changed {
		claims[f] = newClaim(pr, decl, f, v, false)
	}
	// Explicit Claim trailers state a value (or confirm the change); Yield trailers give fields up.
	for _, st := range explicit.claims {
		v := st.Value
		if !st.HasValue {
			v = changed[st.Field]
		}
		claims[st.Field] = newClaim(pr, decl, st.Field, v, true)
	}
	for _, y := range explicit.yields {
		for f := range changed {
			if y.Match(f) {
				c := newClaim(pr, decl, f, core.Value{}, true)
				c.Yield = true
				claims[f] = c
			}
		}
	}

	commands := map[core.Field][]core.Claim{}
	for _, c := range pr.Commands {
		commands[c.Field] = append(commands[c.Field], c)
		if _, ok := claims[c.Field]; !ok {
			claims[c.Field] = c // the field is judged even if the pull request does not change it
		}
	}

	lookup := policy.Overlay{Git: git, Head: changed}
	arb := arbiter.New(pol)
	fields := make([]core.Field, 0, len(claims))
	for f := range claims {
		fields = append(fields, f)
	}
	sort.Slice(fields, func(i, j int) bool { return fields[i].String() < fields[j].String() })
	deps, _ := src.(dependencies)
	if u, ok := src.(parsedUser); ok && pr.Parsed != nil {
		u.useParsed(pr.Parsed)
	}
	for _, f := range fields {
		in := arbiter.Input{Field: f, Now: now, Lookup: lookup}
		if deps != nil {
			if in.Dependents, err = deps.Dependents(f); err != nil {
				return Result{}, fmt.Errorf("pull request #%d: dependents of %s: %w", pr.Number, f, err)
			}
		}
		own, isOwn := claims[f], claims[f].Evidence.Source == "github-pull-request"
		if isOwn {
			in.Live = append(in.Live, own)
		}
		in.Live = append(in.Live, commands[f]...)
		if git != nil {
			cur, ok, err := git.Current(f)
			if err != nil {
				return Result{}, fmt.Errorf("ledger: current claim on %s: %w", f, err)
			}
			if ok {
				in.Git = &cur
			}
			if in.History, err = git.History(f); err != nil {
				return Result{}, fmt.Errorf("ledger: history of %s: %w", f, err)
			}
		}
		if live != nil {
			lc, err := live.Live(f, now)
			if err != nil {
				return Result{}, fmt.Errorf("live claims on %s: %w", f, err)
			}
			in.Live = append(in.Live, lc...)
		}
		res.Claims = append(res.Claims, claims[f])
		j := judge{arb: arb, pol: pol, now: now}
		v := j.decide(in, isOwn)
		if isOwn && len(pr.Contributors) > 0 && contributesTo(pr.Contributors, fileOf[f]) {
			v = j.asContributors(in, pr, fileOf[f], v)
		}
		var ownClaim *core.Claim
		if isOwn {
			ownClaim = &in.Live[0]
		}
		res.Verdicts = append(res.Verdicts, v)
		res.Outcomes = append(res.Outcomes, j.outcome(v, ownClaim))
	}
	return res, nil
}

// judge decides a field for the pull request and says what the verdict means for its own claim.
type judge struct {
	arb *arbiter.Arbiter
	pol *policy.Policy
	now time.Time
}

// decide is the arbiter's verdict, with the pull request's own claim (in.Live[0] when own) winning
// a tie with Git's claim. The arbiter keeps Git's value against a live change that only ties with
// it, as it must for drift; but a pull request is how Git's value changes, and its merge would
// make it Git's claim: an ordinary reviewed change, against a Git claim that is no stronger
// (same rank, same urgency), wins. A Git claim that outranks it (an incident's, a standing
// availability claim) still holds the field, and a freeze still defers it.
func (j judge) decide(in arbiter.Input, own bool) core.Verdict {
	v := j.arb.Decide(in)
	if !own || len(in.Live) != 1 || in.Git == nil || v.Decision != core.DecisionEnforceGit || v.Rule != "git-tie" || v.Winner == nil {
		return v // another live claim competes too: the arbiter's word stands, however it went
	}
	c := in.Live[0]
	if c.Yield {
		return v
	}
	git := *v.Winner
	w := c
	out := core.Verdict{Field: v.Field, Decision: core.DecisionAdopt, Winner: &w, Losers: []core.Claim{git}, Rule: v.Rule, Recheck: v.Recheck}
	result := "the pull request's value " + c.Value.String() + " becomes Git's when it merges"
	switch {
	case c.Value.Equal(git.Value):
		out.Decision, out.Losers, result = core.DecisionEnforceGit, nil, "the pull request wants Git's own value "+c.Value.String()+": nothing changes"
	case !c.Expires.IsZero():
		out.Decision, out.Until = core.DecisionYield, c.Expires
		result += ", until " + c.Expires.UTC().Format(time.RFC3339) + ", when the claim expires"
	}
	for _, s := range v.Explanation {
		if s.Rule == "tie" || s.Rule == "result" {
			continue // Git's tie-break, which a pull request wins (below)
		}
		out.Explanation = append(out.Explanation, s)
	}
	out.Explanation = append(out.Explanation,
		core.Step{Rule: "tie", Outcome: "pull request", Detail: fmt.Sprintf("%s ties with Git's claim (by %s, commit %s) on rank and urgency; "+
			"a pull request is a change to Git, so the newer reviewed change wins the tie (against a live change Git's value would stand)",
			c.Actor, git.Actor.Identity, short(git.Evidence.Commit))},
		core.Step{Rule: "result", Outcome: string(out.Decision), Detail: result})
	return out
}

// outcome is what v means for own (nil: no claim of the pull request's own), with a deferral's
// end taken from its freeze in the policy.
func (j judge) outcome(v core.Verdict, own *core.Claim) report.Outcome {
	o := report.OutcomeOf(v, own)
	if o.Kind != report.OutcomeDeferred {
		return o
	}
	for _, fz := range j.pol.Freezes {
		if "freeze."+fz.Name == o.By {
			if _, end, active := fz.Window(j.now); active {
				o.Until = end
			}
		}
	}
	return o
}

// asContributors judges the pull request's own claim (in.Live[0]) as each contributor to the
// field (in files, when the pull request changes it there) and returns the least favourable
// verdict for the pull request (a veto before a loss, before a deferral or a question to people,
// before a win; the opener's on a tie), with a step naming everyone judged.
func (j judge) asContributors(in arbiter.Input, pr PullRequest, files []string, opener core.Verdict) core.Verdict {
	worst, as := opener, identityLabel(pr.Author)
	seen := map[string]bool{judgedAs(pr.Author): true}
	var names []string
	for _, c := range pr.Contributors {
		if !c.judgedOn(files) {
			continue
		}
		label, key := identityLabel(c.Identity), judgedAs(c.Identity)
		names = append(names, fmt.Sprintf("%s (%s)", c.Identity.ID, c.What))
		if seen[key] {
			continue
		}
		seen[key] = true
		alt := in
		alt.Live = append([]core.Claim(nil), in.Live...)
		alt.Live[0].Actor = core.Actor{Identity: c.Identity}
		if v := j.decide(alt, true); severity(j.outcome(v, &alt.Live[0])) > severity(j.outcome(worst, &in.Live[0])) {
			worst, as = v, label
		}
	}
	step := core.Step{Rule: "contributors", Outcome: "judged as " + as, Detail: fmt.Sprintf(
		"the pull request's claims come from its opener %s and from %s; each must pass, so the least favourable verdict stands: %s's",
		pr.Author.ID, strings.Join(names, ", "), as)}
	worst.Explanation = append([]core.Step{step}, worst.Explanation...)
	return worst
}

// contributesTo reports whether any contributor is judged on a field in files.
func contributesTo(cs []Contributor, files []string) bool {
	return slices.ContainsFunc(cs, func(c Contributor) bool { return c.judgedOn(files) })
}

// judgedOn reports whether c is judged on a field in files. A field the pull request claims
// without changing it (a Claim trailer, a command) has no file: everyone is judged on it.
func (c Contributor) judgedOn(files []string) bool {
	return c.Files == nil || files == nil || slices.ContainsFunc(files, func(p string) bool { return slices.Contains(c.Files, p) })
}

// identityLabel names an identity for the explanation, telling a commit author whose commit
// proves nothing from the same email signed.
func identityLabel(id core.Identity) string {
	if id.Source == core.SourceGitAuthor && !id.Proof.Proven() {
		return id.String() + " (unverified)"
	}
	return id.String()
}

// judgedAs is what makes two identities judge alike: the identity and what proves it. A commit
// authored as alice and signed with bob's key is not the alice of a commit signed with hers (a
// key proves only the principals the policy lists it for), so it is judged on its own.
func judgedAs(id core.Identity) string {
	return identityLabel(id) + "\x00" + id.Proof.Key + "\x00" + id.Proof.Vouched
}

// severity orders outcomes from the pull request's point of view: higher is worse for it.
func severity(o report.Outcome) int {
	switch o.Kind {
	case report.OutcomeVetoed:
		return 3
	case report.OutcomeLoses:
		return 2
	case report.OutcomeDeferred, report.OutcomeAsks:
		return 1
	}
	return 0
}

// content reads a file at sha; nil when it is not expected or not there. A file over the budget is
// not returned: tooLarge is its size, and a Source that can tell the size first (sizer) never
// reads it.
func content(ctx context.Context, src Source, b core.Budget, sha, path string, expected bool) (data []byte, tooLarge int64, err error) {
	if !expected {
		return nil, 0, nil
	}
	if sz, ok := src.(sizer); ok {
		size, ok, err := sz.Size(ctx, sha, path)
		if err != nil || !ok {
			return nil, 0, err
		}
		if size > b.FileBytes {
			return nil, size, nil
		}
	}
	data, ok, err := src.Content(ctx, sha, path)
	if err != nil || !ok {
		return nil, 0, err
	}
	if int64(len(data)) > b.FileBytes {
		return nil, int64(len(data)), nil
	}
	return data, 0, nil
}

func newClaim(pr PullRequest, d core.Declaration, f core.Field, v core.Value, explicit bool) core.Claim {
	intent := d.Intent
	if intent == "" {
		intent = core.IntentBaseline
	}
	return core.Claim{
		Field: f, Actor: core.Actor{Identity: pr.Author}, Value: v, Intent: intent, Motivation: d.Motivation,
		At: pr.Updated, Expires: d.Expires,
		Evidence: core.Evidence{Source: "github-pull-request", Commit: pr.HeadSHA, PR: pr.Number, Explicit: explicit},
	}
}

type explicitClaims struct {
	claims []core.ClaimStatement
	yields []core.FieldPattern
}

// declare merges what the pull request says about itself. Precedence, highest first: labels
// (intent/<name>, motivation/<kind>), the trailer block at the end of the body, then the newest
// commit that declares it. Disagreeing commits are reported, since the pull request as a whole can
// only have one intent.
func declare(pr PullRequest, commits []Commit, res *Result) (core.Declaration, explicitClaims) {
	var d core.Declaration
	var ex explicitClaims
	seenIntent := map[core.Intent]string{}
	for i := len(commits) - 1; i >= 0; i-- { // newest first
		c := commits[i]
		ts := trailers.Parse(c.Message, trailers.Options{})
		cd, problems := trailers.Interpret(ts, c.Time)
		for _, p := range problems {
			res.Problems = append(res.Problems, fmt.Sprintf("commit %s: %v", short(c.SHA), p))
		}
		if cd.Intent != "" {
			seenIntent[cd.Intent] = short(c.SHA)
			if d.Intent == "" {
				d.Intent = cd.Intent
				res.Sources = append(res.Sources, fmt.Sprintf("intent %s from commit %s", cd.Intent, short(c.SHA)))
			}
		}
		if d.Motivation.IsZero() && !cd.Motivation.IsZero() {
			d.Motivation = cd.Motivation
			res.Sources = append(res.Sources, fmt.Sprintf("motivation %s from commit %s", cd.Motivation, short(c.SHA)))
		}
		if d.Expires.IsZero() {
			d.Expires = cd.Expires
		}
		ex.claims = append(ex.claims, cd.Claims...)
		ex.yields = append(ex.yields, cd.Yields...)
	}
	if len(seenIntent) > 1 {
		var parts []string
		for i, sha := range seenIntent {
			parts = append(parts, fmt.Sprintf("%s (%s)", i, sha))
		}
		slices.Sort(parts)
		res.Problems = append(res.Problems, "commits declare different intents: "+strings.Join(parts, ", ")+
			"; state the pull request's intent in its body or with an intent/ label")
	}
	if strings.TrimSpace(pr.Body) != "" {
		// The body is judged like a commit message whose title is the pull request's title.
		ts := trailers.Parse(pr.Title+"\n\n"+pr.Body+"\n", trailers.Options{NoDivider: true})
		bd, problems := trailers.Interpret(ts, pr.Updated)
		for _, p := range problems {
			res.Problems = append(res.Problems, fmt.Sprintf("pull request body: %v", p))
		}
		if bd.Intent != "" {
			d.Intent = bd.Intent
			res.Sources = append(res.Sources, fmt.Sprintf("intent %s from the pull request body", bd.Intent))
		}
		if !bd.Motivation.IsZero() {
			d.Motivation = bd.Motivation
			res.Sources = append(res.Sources, fmt.Sprintf("motivation %s from the pull request body", bd.Motivation))
		}
		if !bd.Expires.IsZero() {
			d.Expires = bd.Expires
		}
		ex.claims = append(ex.claims, bd.Claims...)
		ex.yields = append(ex.yields, bd.Yields...)
	}
	for _, l := range pr.Labels {
		if v, ok := strings.CutPrefix(l, "intent/"); ok && v != "" {
			d.Intent = core.Intent(strings.ToLower(v))
			res.Sources = append(res.Sources, "intent "+strings.ToLower(v)+" from label "+l)
		}
		if v, ok := strings.CutPrefix(l, "motivation/"); ok && v != "" {
			d.Motivation = core.Motivation{Kind: strings.ToLower(v)}
			res.Sources = append(res.Sources, "motivation "+strings.ToLower(v)+" from label "+l)
		}
	}
	d.PR = pr.Number
	return d, ex
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
