package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/ghmarkdown"
	"github.com/parleyhq/parley/reconcile/gitops"
	"github.com/parleyhq/parley/reconcile/internal/gitwrite"
)

// Action is what a verdict does to Git.
type Action string

// Actions. A verdict that writes nothing has no Change at all.
const (
	ActionGate   Action = "gate"   // add a per-field yield gate
	ActionResume Action = "resume" // remove Parley's gate on the field
	ActionAdopt  Action = "adopt"  // write the live value into Git (and drop a gate the field had)
	// ActionAsk puts a hold or an escalation to people on the field's pull request: a commit that
	// changes no file and records the verdict, so the pull request exists and its thread is
	// where people are asked. The field itself is left as it is.
	ActionAsk Action = "ask"
	// ActionPropose puts a veto to people (the policy's veto_ask_when): the vetoed value is
	// committed on the field's proposal branch, never on the base branch, and a pull request
	// proposes it as a reviewed Git change. Merged, it is Git's value like any other; closed, the
	// veto stands. Writers without pull requests leave it on the branch or record the verdict only.
	ActionPropose Action = "propose"
)

// Change is one commit's worth of Git change for one verdict.
type Change struct {
	Field  core.Field
	Action Action
	// Files lists the files the change edits, in order.
	Files []string
	// Edit applies the change to a branch's current files; it is re-applied on top of a branch that
	// moved, and finds nothing to do when the change is already there.
	Edit gitwrite.Edit
	// Diff is the planned content of each edited file (path -> new bytes), against the snapshot.
	Diff map[string][2][]byte
	// Message is the commit message; its trailers carry the winner's intent and motivation and
	// the verdict's decision, rule and evidence.
	Message string
	// Branch is the work branch for pull-request mode: one per field, so later verdicts on the
	// field update the same pull request.
	Branch string
	// BranchOnly marks a change with nothing to do on the base branch that may still have work on
	// the field's unmerged pull request branch: a yield that ended before its gate was merged.
	// Writers that push to the base branch skip it.
	BranchOnly bool
	Title      string // the pull request's title (the commit's subject)
	Body       string // the pull request's body
	// Ask marks a change that asks people to decide: an adopted value Parley cannot place at its
	// source. It keeps the live value under a gate and says in its body where the value could go;
	// writers that can open pull requests send it through one even in direct mode.
	Ask bool
}

// gateLoc is a gate found in the snapshot: the file and object holding it.
type gateLoc struct {
	File   string
	Target gitops.Target
	Gate   gitops.Gate
}

// gateIndex lists the gates Parley wrote in the snapshot's YAML files, by field.
func gateIndex(files map[string][]byte) map[core.Field][]gateLoc {
	out := map[core.Field][]gateLoc{}
	for _, p := range sortedPaths(files) {
		if !(isYAML(p) || strings.HasSuffix(p, ".tf")) || !strings.Contains(string(files[p]), gitops.Annotation) {
			continue
		}
		listed, err := gitops.ListGates(p, files[p])
		if err != nil {
			continue // a file Parley cannot read holds no gate Parley can manage; discovery reports it
		}
		for _, l := range listed {
			out[l.Field] = append(out[l.Field], gateLoc{File: p, Target: l.Target, Gate: l.Gate})
		}
	}
	return out
}

// GatedFields lists the fields Parley gated in a snapshot's files, sorted: the fields to judge again
// when the policy or Git's claims change, since a gate stands only as long as its verdict does.
func GatedFields(files map[string][]byte) []core.Field {
	idx := gateIndex(files)
	out := make([]core.Field, 0, len(idx))
	for f := range idx {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func isYAML(p string) bool { return strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml") }

func sortedPaths(files map[string][]byte) []string {
	ps := make([]string, 0, len(files))
	for p := range files {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// planner plans changes against one snapshot; it tracks what earlier changes of the same batch
// did, so two fields of one object gate in two commits that both land.
type planner struct {
	files map[string][]byte
	gated map[core.Field][]gateLoc
	inv   *gitops.Inventory
	snap  Snapshot
	// branches: verdicts reach Git through per-field pull request branches, where a gate may
	// wait unmerged (see Change.BranchOnly).
	branches bool
}

func newPlanner(snap Snapshot, gated map[core.Field][]gateLoc) *planner {
	files := make(map[string][]byte, len(snap.Files))
	for p, b := range snap.Files {
		files[p] = b
	}
	// Discovery reads the snapshot's own files: a change landed within the batch edits gates and
	// values, never which directories a manager applies.
	return &planner{files: files, gated: gated, inv: snap.inventory(), snap: snap}
}

// landed folds a change that landed into the planner's files, so later plans build on it.
func (p *planner) landed(c Change) {
	for f, d := range c.Diff {
		p.files[f] = d[1]
	}
	p.gated = gateIndex(p.files)
}

// plan maps a verdict to a change, or says why there is none.
func (p *planner) plan(v core.Verdict) (*Change, string) {
	f := v.Field
	switch v.Decision {
	case core.DecisionYield:
		return p.planYield(v)
	case core.DecisionAdopt:
		return p.planAdopt(v)
	case core.DecisionEnforceGit, core.DecisionVeto:
		if len(p.gated[f]) > 0 {
			return p.planResume(v)
		}
		if p.branches && f.Scheme == core.SchemeKubernetes {
			if c := p.planBranchResume(v); c != nil {
				return c, "Git's value stands; a gate on the field's pull request branch, if any, is removed there"
			}
		}
		if v.Decision == core.DecisionVeto && v.Proposed != nil {
			return p.planPropose(v)
		}
		if v.Decision == core.DecisionVeto {
			if f.Scheme == core.SchemeTerraform {
				return nil, "vetoed: Git's value stands (the next terraform apply restores it); nothing to write"
			}
			return nil, "vetoed: Git's value stands and the GitOps tool reverts the live change; nothing to write"
		}
		return nil, "Git's value stands; nothing to write"
	case core.DecisionHold:
		if v.Rule == "no-claims" {
			return nil, "held: no one claims the field; no automatic writes"
		}
		return p.planAsk(v)
	case core.DecisionEscalate:
		return p.planAsk(v)
	}
	return nil, "no decision"
}

// planAsk puts a hold or an escalation to people: nothing of the field is written, but the
// field's pull request is opened (or commented on) with the explanation and the people the policy
// asks. Writers without pull requests record the verdict only.
func (p *planner) planAsk(v core.Verdict) (*Change, string) {
	c := &Change{Field: v.Field, Action: ActionAsk, Ask: true, Branch: branchFor(v.Field),
		Edit: func(gitwrite.Files) (map[string][]byte, error) { return nil, nil }}
	c.Title, c.Body, c.Message = message(v, ActionAsk, nil, askNote(v))
	return c, ""
}

// planPropose puts a veto to people: the vetoed claim's value is written as an adoption would
// write it, but as a proposal on its own branch, with the claim's intent, motivation and evidence
// as the commit's trailers, so that merged it is Git's claim like any other reviewed change.
func (p *planner) planPropose(v core.Verdict) (*Change, string) {
	as := v
	as.Winner = v.Proposed
	c, why := p.planAdopt(as)
	if c == nil {
		return nil, "vetoed; the veto is put to people, but Parley cannot write the proposed value: " + strings.TrimPrefix(why, "adopted, but ")
	}
	c.Action, c.Ask, c.Branch = ActionPropose, true, proposalBranch(v.Field)
	c.Title, c.Body, c.Message = message(v, ActionPropose, c.Files, proposeNote(v))
	return c, ""
}

// ProposalBranchPrefix begins the branch of every veto put to people: the App tells a proposal's
// pull request, closed without merging, that the veto stands.
const ProposalBranchPrefix = "parley/propose/"

// proposalBranch is the branch of a field's proposal: apart from the field's gate branch, so a
// proposal never mixes with a yield waiting to be merged.
func proposalBranch(f core.Field) string {
	return strings.Replace(branchFor(f), "parley/", ProposalBranchPrefix, 1)
}

// proposeNote says what a veto put to people means and how people end it.
func proposeNote(v core.Verdict) string {
	c := v.Proposed
	who := c.Actor.Name
	if who == "" {
		who = c.Actor.Identity.String()
	}
	var b strings.Builder
	md := markdown.text
	fmt.Fprintf(&b, "%s changed this field to %s outside Git, and the policy vetoes it (%s): Git's value stands, and the next apply restores it. "+
		"The policy puts this veto to people, so this pull request proposes %s's value as a reviewed Git change.", md(who), md(c.Value.String()), md(v.Rule), md(who))
	b.WriteString("\n\n- intent: " + md(orDash(string(c.Intent))) + "\n- motivation: " + md(orDash(c.Motivation.String())) +
		"\n- evidence: " + md(orDash(claimEvidence(*c))) + "\n\n")
	b.WriteString(askedText(v))
	b.WriteString("Merge this pull request to make the value Git's, like any other reviewed change. " +
		"Close it to keep the veto: Git's value stands, and Parley does not propose this value again.")
	return b.String()
}

// askedText says who is asked to decide and, when the policy names nobody, why these people (the
// code owners of the field's file) or, plainly, that nobody is. The people asked (@user,
// @org/team, from the policy or CODEOWNERS) are left live: mentioning them is the point. The
// reason is data and is escaped.
func askedText(v core.Verdict) string {
	why := ""
	for _, s := range v.Explanation {
		if s.Rule == "ask" {
			why = s.Detail
		}
	}
	if len(v.Ask) == 0 {
		if why == "" {
			return "Nobody is asked: the policy names no one. "
		}
		return "**Nobody is asked**: " + ghmarkdown.Text(sentence(why)) + " "
	}
	s := strings.Join(v.Ask, ", ") + ": you are asked to decide"
	if why != "" {
		s += " (" + ghmarkdown.Text(why) + ")"
	}
	return s + ". "
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// askNote says what a hold or an escalation means and how people end it.
func askNote(v core.Verdict) string {
	var b strings.Builder
	if v.Decision == core.DecisionHold {
		b.WriteString("Parley writes nothing for this field")
		if !v.Until.IsZero() {
			b.WriteString(" until " + v.Until.UTC().Format(time.RFC3339) + ", when it judges the field again")
		} else {
			b.WriteString(" until someone decides")
		}
		b.WriteString(". ")
	} else {
		b.WriteString("The policy cannot decide this contest; Parley writes nothing for this field until someone does. ")
	}
	b.WriteString(askedText(v))
	b.WriteString("To decide, set the value in Git with a commit whose Intent and Motivation trailers say why (it becomes Git's claim), " +
		"or stop the writer that should not act. This pull request changes no file; it is closed when the field is decided.")
	return b.String()
}

func (p *planner) planYield(v core.Verdict) (*Change, string) {
	f := v.Field
	pl, located := p.locate(f)
	remote := false
	if !located && f.Scheme == core.SchemeKubernetes && p.inv != nil {
		// No manifest or chart in the repository defines the object, but releases of charts
		// Parley does not fetch install into its namespace: one of them may, and revert it.
		pl, remote = p.inv.RemoteReleases(f.Object())
	}
	if c, ok, _ := p.snap.gitClaim(f); (!ok || c.Value.Absent()) && !remote {
		if f.Scheme == core.SchemeTerraform {
			return nil, "yielded; Git does not set this attribute, so terraform apply does not revert it: nothing to gate"
		}
		return nil, "yielded; Git does not set this field, so no GitOps tool reverts it: nothing to gate"
	}
	if locs := p.gated[f]; len(locs) > 0 {
		return nil, "yielded; already gated in " + locList(locs)
	}
	if f.Scheme == core.SchemeTerraform {
		// Terraform's own per-attribute pause: lifecycle ignore_changes in the resource.
		file, ok := p.terraformFile(f)
		if !ok {
			return nil, fmt.Sprintf("yielded, but no .tf file in %s declares %s: nothing to gate", f.Module, f.Resource)
		}
		g := gitops.Gate{Field: f, Until: v.Until, Rule: v.Rule}
		return p.change(v, ActionGate, []editStep{{file: file, fn: func(path string, b []byte) ([]byte, bool, error) {
			return gitops.AddTFGate(path, b, g)
		}}})
	}
	if !located && !remote {
		return nil, fmt.Sprintf("yielded, but no manifest in the repository defines %s: nothing to gate", objectName(f))
	}
	if len(pl.Managers) == 0 {
		return nil, fmt.Sprintf("yielded, but no Argo CD Application or Flux Kustomization applies %s: nothing to gate", pl.Manifest)
	}
	g := gitops.Gate{Field: f, Until: v.Until, Rule: v.Rule}
	if p.snap.Policy != nil {
		g.EnableDriftDetection = p.snap.Policy.GitOps.EnableHelmDriftDetection
	}
	var steps []editStep
	for _, m := range pl.Managers {
		m := m
		steps = append(steps, editStep{file: m.File, fn: func(path string, b []byte) ([]byte, bool, error) {
			return gitops.AddGate(path, b, m.Target, g)
		}})
	}
	note := ""
	if remote {
		note = remoteNote(f, pl)
	}
	return p.changeWithNote(v, ActionGate, steps, note)
}

// askWhere answers an adopted value Parley cannot place at its source: the live value is kept
// under a gate in the managers that apply the object, and the change (a pull request, even in
// direct mode) says where the value could go. Nothing is guessed.
//
// where says it, given how to place the data it quotes: plainly for the reason, escaped for the
// pull request's body.
func (p *planner) askWhere(v core.Verdict, pl gitops.Placement, where func(prose) string) (*Change, string) {
	f := v.Field
	if len(pl.Managers) == 0 {
		return nil, "adopted, but Parley cannot place the value: " + where(plain)
	}
	g := gitops.Gate{Field: f, Rule: v.Rule}
	if p.snap.Policy != nil {
		g.EnableDriftDetection = p.snap.Policy.GitOps.EnableHelmDriftDetection
	}
	var steps []editStep
	for _, m := range pl.Managers {
		m := m
		steps = append(steps, editStep{file: m.File, fn: func(path string, b []byte) ([]byte, bool, error) {
			return gitops.AddGate(path, b, m.Target, g)
		}})
	}
	note := "Adopted, but Parley cannot write the value where it is produced. " + where(markdown) +
		" Until then this gate keeps the live value; once Git renders it, Parley removes the gate."
	c, why := p.changeWithNote(v, ActionGate, steps, note)
	if c == nil {
		return nil, "adopted, but Parley cannot place the value (" + why + "): " + where(plain)
	}
	c.Ask = true
	title := "parley: where should " + pointerLabel(f) + " of " + objectName(f) + " = " + v.Winner.Value.String() + " go?"
	c.Message = title + strings.TrimPrefix(c.Message, c.Title)
	c.Title = title
	return c, ""
}

// releaseOf names the releases that install the object of pl.
func releaseOf(pl gitops.Placement) string {
	names := make([]string, len(pl.Managers))
	for i, m := range pl.Managers {
		names[i] = m.Target.String()
	}
	return strings.Join(names, ", ")
}

// remoteNote says why a gate went into releases of charts Parley does not fetch.
func remoteNote(f core.Field, pl gitops.Placement) string {
	targets := make([]string, len(pl.Managers))
	for i, m := range pl.Managers {
		targets[i] = m.Target.String()
	}
	md := markdown.text
	return fmt.Sprintf("No manifest in the repository defines %s. It is taken to come from a chart Parley does not fetch (%s), installed into %s by %s: the gate names the object, so it pauses the release that renders it and matches nothing in the others.",
		md(objectName(f)), md(strings.Join(slices.Compact(slices.Sorted(slices.Values(pl.RemoteCharts))), "; ")), md(f.Namespace), md(strings.Join(targets, ", ")))
}

func (p *planner) planResume(v core.Verdict) (*Change, string) {
	var steps []editStep
	for _, l := range p.gated[v.Field] {
		l := l
		steps = append(steps, editStep{file: l.File, fn: func(path string, b []byte) ([]byte, bool, error) {
			return gitops.RemoveGate(path, b, l.Target, v.Field)
		}})
	}
	return p.change(v, ActionResume, steps)
}

// planBranchResume is a resume for the field's pull request branch: the base branch has no gate on
// the field, but a yield whose pull request was never merged left one on the branch.
func (p *planner) planBranchResume(v core.Verdict) *Change {
	pl, ok := p.locate(v.Field)
	if !ok || len(pl.Managers) == 0 {
		return nil
	}
	var steps []editStep
	c := &Change{Field: v.Field, Action: ActionResume, Branch: branchFor(v.Field), BranchOnly: true}
	for _, m := range pl.Managers {
		m := m
		c.Files = append(c.Files, m.File)
		steps = append(steps, editStep{file: m.File, fn: func(path string, b []byte) ([]byte, bool, error) {
			return gitops.RemoveGate(path, b, m.Target, v.Field)
		}})
	}
	c.Title, c.Body, c.Message = message(v, ActionResume, c.Files, "")
	c.Edit = editOf(steps)
	return c
}

func (p *planner) planAdopt(v core.Verdict) (*Change, string) {
	f := v.Field
	if v.Winner == nil || v.Winner.Value.Absent() {
		return nil, "adopt without a value to write"
	}
	val := v.Winner.Value
	var steps []editStep
	switch f.Scheme {
	case core.SchemeKubernetes:
		if c, ok, _ := p.snap.gitClaim(f); ok && c.Value.Equal(val) {
			// Git already says so (a person wrote it where Parley asked): only a gate that kept
			// the live value meanwhile is left to remove.
			for _, l := range p.gated[f] {
				l := l
				steps = append(steps, editStep{file: l.File, fn: func(path string, b []byte) ([]byte, bool, error) {
					return gitops.RemoveGate(path, b, l.Target, f)
				}})
			}
			return p.change(v, ActionAdopt, steps)
		}
		pl, ok := p.locate(f)
		if !ok {
			if r, remote := p.inv.RemoteReleases(f.Object()); remote {
				return p.askWhere(v, r, func(q prose) string {
					return fmt.Sprintf("%s comes from a chart Parley does not fetch (%s), so it cannot tell which values key produces %s. Set it in the values of the release that installs it (%s) by hand.",
						q.text(objectName(f)), q.text(strings.Join(slices.Compact(slices.Sorted(slices.Values(r.RemoteCharts))), "; ")), q.text(pointerLabel(f)), q.text(releaseOf(r)))
				})
			}
			return nil, fmt.Sprintf("adopted, but no manifest in the repository defines %s: nothing to write", objectName(f))
		}
		if pl.Built != "" && pl.Built != "." && !strings.HasPrefix(pl.Manifest, pl.Built+"/") {
			// The manifest is a base other builds may share: the value goes into the overlay, as
			// its own patch (an existing one that sets the field, or a new one).
			return p.planOverlayAdopt(v, pl)
		}
		if pl.Chart != "" {
			// Adoption at the source: the release's values key that produces the field.
			key, mapping, m, err := p.inv.HelmValuesKey(f, val)
			switch {
			case err != nil:
				return nil, fmt.Sprintf("adopted, but %s is rendered from the Helm chart %s: %v; nothing is written", objectName(f), pl.Chart, err)
			case key == nil && len(mapping) == 0:
				return p.askWhere(v, pl, func(q prose) string {
					return fmt.Sprintf("No key of the values of %s renders %s as %s: the template %s sets it some other way. Write it into the chart (%s), or into the values under a key the chart would read, by hand.",
						q.text(releaseOf(pl)), q.text(pointerLabel(f)), q.text(val.String()), q.text(pl.Manifest), q.text(pl.Chart))
				})
			case key == nil:
				return p.askWhere(v, pl, func(q prose) string {
					keys := make([]string, len(mapping))
					for i, k := range mapping {
						keys[i] = q.code(k.String())
					}
					return fmt.Sprintf("Several keys of the values of %s render %s as %s, each changing nothing else: %s. Parley does not guess which one is meant: set that one to %s by hand.",
						q.text(releaseOf(pl)), q.text(pointerLabel(f)), q.text(val.String()), strings.Join(keys, ", "), q.text(val.String()))
				})
			}
			// Where the key is set for this release: the HelmRelease's spec.values, the
			// Application's helm.valuesObject, or one of its values files.
			tgt, err := p.inv.HelmValuesTarget(f, key)
			if err != nil {
				return p.askWhere(v, pl, func(q prose) string {
					return fmt.Sprintf("The value belongs at %s of the values of %s, but Parley cannot write it there: %s.", q.code(key.String()), q.text(m.Target.String()), q.text(err.Error()))
				})
			}
			var write func(path string, b []byte) ([]byte, bool, error)
			switch tgt.Kind {
			case gitops.ValuesInHelmRelease:
				write = func(path string, b []byte) ([]byte, bool, error) {
					return gitops.AdoptHelmValue(path, b, tgt.Target, key, val)
				}
			case gitops.ValuesInObject:
				write = func(path string, b []byte) ([]byte, bool, error) {
					return gitops.AdoptArgoHelmValue(path, b, tgt.Target, tgt.Source, key, val)
				}
			case gitops.ValuesInFile:
				write = func(path string, b []byte) ([]byte, bool, error) { return gitops.AdoptValuesFile(path, b, key, val) }
			default:
				return nil, fmt.Sprintf("adopted, but the values of %s are kept in an unknown place (%q); nothing is written", m.Target, tgt.Kind)
			}
			steps = append(steps, editStep{file: tgt.File, fn: write})
			for _, l := range p.gated[f] {
				l := l
				steps = append(steps, editStep{file: l.File, fn: func(path string, b []byte) ([]byte, bool, error) {
					return gitops.RemoveGate(path, b, l.Target, f)
				}})
			}
			return p.change(v, ActionAdopt, steps)
		}
		steps = append(steps, editStep{file: pl.Manifest, fn: func(path string, b []byte) ([]byte, bool, error) {
			return gitops.AdoptYAML(path, b, f, val)
		}})
		// The field is Git's again: a gate on it would only hide the next drift.
		for _, l := range p.gated[f] {
			l := l
			steps = append(steps, editStep{file: l.File, fn: func(path string, b []byte) ([]byte, bool, error) {
				return gitops.RemoveGate(path, b, l.Target, f)
			}})
		}
	case core.SchemeTerraform:
		file, ok := p.terraformFile(f)
		if !ok {
			return nil, fmt.Sprintf("adopted, but no .tf file in %s declares %s: nothing to write", f.Module, f.Resource)
		}
		steps = append(steps, editStep{file: file, fn: func(path string, b []byte) ([]byte, bool, error) {
			return gitops.AdoptTF(path, b, f, val)
		}})
	}
	return p.change(v, ActionAdopt, steps)
}

// planOverlayAdopt writes an adopted value as a patch of the overlay that builds the object, never
// into the base it shares with other builds. gitops.AdoptOverlayPatch builds the overlay again to
// check the result; on a branch that moved it runs again over the branch's files.
func (p *planner) planOverlayAdopt(v core.Verdict, pl gitops.Placement) (*Change, string) {
	f, val := v.Field, v.Winner.Value
	base := maps.Clone(p.files)
	out, err := gitops.AdoptOverlayPatch(context.Background(), p.kustomizer(), base, pl.Built, f, val)
	if err != nil {
		return nil, fmt.Sprintf("adopted, but %s comes from %s, outside the overlay %s that builds it, and no patch in the overlay can set it: %v; nothing is written",
			objectName(f), pl.Manifest, pl.Built, err)
	}
	var steps []editStep
	for _, file := range slices.Sorted(maps.Keys(out)) {
		steps = append(steps, editStep{file: file, fn: func(path string, b []byte) ([]byte, bool, error) {
			files := maps.Clone(base)
			files[path] = b
			again, err := gitops.AdoptOverlayPatch(context.Background(), p.kustomizer(), files, pl.Built, f, val)
			if err != nil {
				return nil, false, err
			}
			if len(again) == 0 {
				return b, false, nil // the overlay already builds the value
			}
			nb, ok := again[path]
			if !ok || len(again) != 1 {
				return nil, false, fmt.Errorf("the overlay %s changed: the patch for %s now belongs in %v", pl.Built, f, slices.Sorted(maps.Keys(again)))
			}
			return nb, true, nil
		}})
	}
	for _, l := range p.gated[f] {
		l := l
		steps = append(steps, editStep{file: l.File, fn: func(path string, b []byte) ([]byte, bool, error) {
			return gitops.RemoveGate(path, b, l.Target, f)
		}})
	}
	md := markdown.text
	return p.changeWithNote(v, ActionAdopt, steps, fmt.Sprintf("%s comes from %s, a base other builds may share: the value is written as a patch of the overlay %s.",
		md(objectName(f)), md(pl.Manifest), md(pl.Built)))
}

// kustomizer builds the overlays adoption edits as discovery built them: in the snapshot's render
// worker, under its budgets, when it has one (the overlay is the repository's, and an edit can make
// it fan out); nil builds them in this process. The worker's time budget bounds each build.
func (p *planner) kustomizer() gitops.KustomizeBuilder {
	if k, ok := p.snap.Helm.(gitops.KustomizeBuilder); ok {
		return k
	}
	return nil
}

func (p *planner) locate(f core.Field) (gitops.Placement, bool) {
	if p.inv == nil {
		return gitops.Placement{}, false
	}
	return p.inv.Locate(f.Object())
}

// terraformFile finds the .tf file of f's module directory that declares f's resource.
func (p *planner) terraformFile(f core.Field) (string, bool) { return terraformFileIn(p.files, f) }

// terraformFileIn finds, among files, the .tf file of f's module directory that declares f's
// resource.
func terraformFileIn(files map[string][]byte, f core.Field) (string, bool) {
	dir := f.Module
	if dir == "" {
		dir = "."
	}
	addr := f.Resource
	if i := strings.IndexByte(addr, '['); i >= 0 {
		addr = addr[:i] // an instance of a counted resource is declared by the resource block
	}
	kind, name, ok := strings.Cut(addr, ".")
	if !ok {
		return "", false
	}
	needle := fmt.Sprintf("%q %q", kind, name)
	for _, fp := range sortedPaths(files) {
		if !strings.HasSuffix(fp, ".tf") || path.Dir(fp) != dir {
			continue
		}
		if strings.Contains(strings.Join(strings.Fields(string(files[fp])), " "), needle) {
			return fp, true
		}
	}
	return "", false
}

// editStep is one file edit of a change.
type editStep struct {
	file string
	fn   func(path string, content []byte) ([]byte, bool, error)
}

// change runs the steps on the planner's files to see what they change; a change that changes
// nothing is no change (the gate is there, the value is Git's already).
func (p *planner) change(v core.Verdict, a Action, steps []editStep) (*Change, string) {
	return p.changeWithNote(v, a, steps, "")
}

// changeWithNote is change with a paragraph for people in the commit and pull request.
func (p *planner) changeWithNote(v core.Verdict, a Action, steps []editStep, note string) (*Change, string) {
	diff, err := runSteps(steps, func(path string) ([]byte, bool, error) {
		b, ok := p.files[path]
		return b, ok, nil
	})
	if err != nil {
		return nil, fmt.Sprintf("%s planned but not possible: %v", a, err)
	}
	if len(diff) == 0 {
		return nil, string(a) + ": Git already says so; nothing to write"
	}
	c := &Change{Field: v.Field, Action: a, Diff: diff, Branch: branchFor(v.Field)}
	for f := range diff {
		c.Files = append(c.Files, f)
	}
	sort.Strings(c.Files)
	c.Title, c.Body, c.Message = message(v, a, c.Files, note)
	c.Edit = editOf(steps)
	return c, ""
}

// editOf is the steps as a gitwrite edit: applied to a branch's current files, it returns the
// files they change.
func editOf(steps []editStep) gitwrite.Edit {
	return func(files gitwrite.Files) (map[string][]byte, error) {
		d, err := runSteps(steps, files.Read)
		if err != nil {
			return nil, err
		}
		out := make(map[string][]byte, len(d))
		for f, x := range d {
			out[f] = x[1]
		}
		return out, nil
	}
}

// runSteps applies the steps in order (two steps may edit one file) and returns each changed
// file's old and new content.
func runSteps(steps []editStep, read func(string) ([]byte, bool, error)) (map[string][2][]byte, error) {
	cur := map[string][]byte{}
	orig := map[string][]byte{}
	for _, s := range steps {
		b, ok := cur[s.file]
		if !ok {
			var found bool
			var err error
			b, found, err = read(s.file)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", s.file, err)
			}
			if !found {
				return nil, fmt.Errorf("%s: no such file on the branch", s.file)
			}
			orig[s.file] = b
		}
		out, changed, err := s.fn(s.file, b)
		if err != nil {
			return nil, err
		}
		if changed {
			cur[s.file] = out
		} else {
			cur[s.file] = b
		}
	}
	diff := map[string][2][]byte{}
	for f, b := range cur {
		if string(b) != string(orig[f]) {
			diff[f] = [2][]byte{orig[f], b}
		}
	}
	return diff, nil
}

// branchFor names the work branch of a field: readable, and unique through a hash of the address.
func branchFor(f core.Field) string {
	sum := sha256.Sum256([]byte(f.String()))
	var name string
	if f.Scheme == core.SchemeKubernetes {
		name = strings.ToLower(f.Kind) + "-" + f.Namespace + "-" + f.Name
	} else {
		name = f.Resource
	}
	name = slug(name + "-" + lastToken(f))
	if len(name) > 60 {
		name = name[:60]
	}
	return "parley/" + strings.Trim(name, "-") + "-" + hex.EncodeToString(sum[:4])
}

func lastToken(f core.Field) string {
	toks := f.PointerTokens()
	if len(toks) == 0 {
		return ""
	}
	return toks[len(toks)-1]
}

func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return b.String()
}

func locList(locs []gateLoc) string {
	var out []string
	for _, l := range locs {
		out = append(out, l.File+" ("+l.Target.String()+")")
	}
	return strings.Join(out, ", ")
}

// objectName is "Deployment prod/web" or "aws_autoscaling_group.consumer".
func objectName(f core.Field) string {
	if f.Scheme == core.SchemeTerraform {
		return f.Resource
	}
	if f.Namespace == "" {
		return f.Kind + " " + f.Name
	}
	return f.Kind + " " + f.Namespace + "/" + f.Name
}
