package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/gitcatfile"
	"github.com/parleyhq/parley/internal/gitlog"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/trailers/ledger"
)

type ledgerFlags struct {
	repo, branch, field string
	json, all           bool
}

func newLedgerCmd() *cobra.Command {
	var fl ledgerFlags
	cmd := &cobra.Command{
		Use:   "ledger",
		Short: "Show every field's claim history and the claim Git holds now",
		Long: `Update the repository's ledger index (<git dir>/parley/ledger.db; only commits after the last update
are read) and print, for each field, its claim history on the branch's first-parent history: commit,
time, author (marked "(unverified)" when no signature by a key the branch's policy lists for that email
proves it, as arbitration counts it), value, intent, motivation, whether
the claim was implicit (the commit changed the field) or explicit (a Claim trailer), expiry and pull
request; then the claim Git holds now.

The files read are the policy's (.parley/policy.hcl on the branch, block ledger { include, exclude });
without one, every manifest and .tf file except under testdata/, node_modules/ and vendor/. A first
update of a long history shows its progress on a terminal; Ctrl-C stops it, and the next run
resumes from its last checkpoint.

Without --field, fields changed after they were created are shown in full and the others counted;
--all shows every field. Problems found while reading the history (malformed trailers, files that could
not be parsed) are listed at the end.`,
		Example: `  parley ledger
  parley ledger --repo ../infra --branch main
  parley ledger --field 'k8s:apps/Deployment/prod/*#/spec/replicas'
  parley ledger --field 'tf:**//aws_autoscaling_group.*' --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLedger(cmd, fl, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.repo, "repo", ".", "the repository (a work tree or bare repository)")
	f.StringVar(&fl.branch, "branch", "", "the branch (default: the branch HEAD points at)")
	f.StringVar(&fl.field, "field", "", "only fields matching this address pattern (* within a segment, ** across pointer tokens or module directories)")
	f.BoolVar(&fl.json, "json", false, "print JSON")
	f.BoolVar(&fl.all, "all", false, "show every field in full, including fields with a single claim")
	return cmd
}

func runLedger(cmd *cobra.Command, fl ledgerFlags, out io.Writer) error {
	var pattern core.FieldPattern
	if fl.field != "" {
		p, err := core.ParseFieldPattern(fl.field)
		if err != nil {
			return usageErr(fmt.Errorf("--field: %w", err))
		}
		pattern = p
	}
	l, err := reconcile.OpenLedger(fl.repo, fl.branch, "", ledger.Options{Progress: newProgressLine(cmd.ErrOrStderr(), false).update, OpenBlobs: openCatFile, OpenHistory: openGitHistory})
	if errors.Is(err, ledger.ErrNotRepository) {
		return usageErr(notRepository(fl.repo, err))
	}
	if err != nil {
		return err
	}
	defer l.Close()
	defer tradeMemoryForGC()()
	stats, err := l.Update(cmd.Context(), fl.branch)
	clearProgressLine(cmd.ErrOrStderr())
	if errors.Is(err, ledger.ErrNoBranch) {
		return usageErr(err)
	}
	if err != nil {
		return err
	}
	b, err := l.Branch(stats.Branch)
	if err != nil {
		return err
	}
	head, err := ledgerHeadOf(b, stats)
	if err != nil {
		return err
	}
	// The ledger of a long history is large: fields go out as the index hands them over, one at a
	// time, so memory holds one field's history, not the report.
	if fl.json {
		return writeLedgerJSON(cmd.Context(), out, b, head, pattern)
	}
	return writeLedgerText(cmd.Context(), out, b, head, pattern, fl.all || fl.field != "", ledgerPolicy(l, stats.Branch))
}

// progressLine shows a long ledger update's progress on one line of a terminal, redrawn at most
// five times a second. On anything but a terminal (a CI log, a pipe) it writes nothing.
type progressLine struct {
	out  io.Writer
	on   bool
	last time.Time
}

func newProgressLine(out io.Writer, force bool) *progressLine {
	return &progressLine{out: out, on: force || isTerminal(out)}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (p *progressLine) update(pr ledger.Progress) {
	if !p.on || pr.Done < pr.Total && time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.out, "\r\033[Kparley: indexing %s: %d of %d commits (%d%%)", strings.TrimPrefix(pr.Branch, "refs/heads/"),
		pr.Done, pr.Total, pr.Done*100/max(pr.Total, 1))
}

// clearProgressLine erases the progress line, if a terminal shows one.
func clearProgressLine(out io.Writer) {
	if isTerminal(out) {
		fmt.Fprint(out, "\r\033[K")
	}
}

// ledgerReport is the ledger command's JSON output. It is written piece by piece (see
// writeLedgerJSON), in exactly the bytes encoding/json gives this type with a two-space indent.
type ledgerReport struct {
	Branch   string          `json:"branch"`
	Tip      string          `json:"tip"`
	Commits  int             `json:"commits"`
	Update   ledgerUpdate    `json:"update"`
	Fields   []fieldReport   `json:"fields"`
	Problems []problemReport `json:"problems"`
}

// ledgerHead is what the report says before its fields.
type ledgerHead struct {
	Branch  string
	Tip     string
	Commits int
	Update  ledgerUpdate
}

type ledgerUpdate struct {
	From         string `json:"from,omitempty"`
	Commits      int    `json:"commits"`
	Rebuilt      bool   `json:"rebuilt"`
	PathsChanged bool   `json:"paths_changed,omitempty"` // the policy's ledger paths changed: rebuilt
}

type fieldReport struct {
	Field   string        `json:"field"`
	History []claimReport `json:"history"`
	Current *claimReport  `json:"current,omitempty"` // omitted when Git holds no value
}

// claimReport is one commit's claim on a field: the claim in Parley's one claim shape (the author is
// its actor, the commit its evidence), and what the commit did.
type claimReport struct {
	Claim          core.Claim `json:"claim"`
	Subject        string     `json:"subject"`
	Changed        bool       `json:"changed"`         // the commit changed the field (else: a Claim trailer alone)
	IntentDeclared bool       `json:"intent_declared"` // false: no Intent trailer, the intent is the default
	Merge          bool       `json:"merge,omitempty"`
}

type problemReport struct {
	Commit  string `json:"commit"`
	Path    string `json:"path,omitempty"`
	Line    int    `json:"line,omitempty"`
	Key     string `json:"key,omitempty"`
	Value   string `json:"value,omitempty"`
	Message string `json:"message"`
}

// openCatFile makes the ledger read file contents through `git cat-file --batch` where git is
// installed: a first index costs much less CPU than with go-git's blob reads. Only the CLI does:
// serve's image holds no git.
func openCatFile(ctx context.Context, gitDir string) (ledger.BlobSource, error) {
	r, err := gitcatfile.Start(ctx, gitDir)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// openGitHistory makes the ledger walk the history and compare each commit's tree with its first
// parent's through git rev-list, cat-file and diff-tree where git is installed: go-git's tree
// reads are the first index's serial first stage. Only the CLI does: serve's image holds no git.
func openGitHistory(_ context.Context, gitDir string) (ledger.HistorySource, error) {
	h, err := gitlog.Open(gitDir)
	if err != nil {
		return nil, err
	}
	return h, nil
}

func claimOf(e ledger.Entry) claimReport {
	return claimReport{Claim: e.Claim, Subject: e.Subject, Changed: e.Changed, IntentDeclared: e.IntentDeclared, Merge: e.Parents > 1}
}

func ledgerHeadOf(b *ledger.Branch, stats ledger.UpdateStats) (ledgerHead, error) {
	tip, commits, err := b.Checkpoint()
	if err != nil {
		return ledgerHead{}, err
	}
	return ledgerHead{Branch: b.Name(), Tip: tip, Commits: commits,
		Update: ledgerUpdate{From: stats.From, Commits: stats.Commits, Rebuilt: stats.Rebuilt, PathsChanged: stats.PathsChanged}}, nil
}

// fieldOf is one field's report: its history and the claim Git holds now.
func fieldOf(h ledger.FieldHistory) fieldReport {
	fr := fieldReport{Field: h.Field.String(), History: make([]claimReport, 0, len(h.Entries))}
	for _, e := range h.Entries {
		fr.History = append(fr.History, claimOf(e))
	}
	if i := currentIndex(h); i >= 0 {
		c := claimOf(h.Entries[i])
		fr.Current = &c
	}
	return fr
}

// currentIndex is the entry the report shows as the claim Git holds now: the last one, not a yield,
// of the commit that made the current claim; -1 when Git holds no value.
func currentIndex(h ledger.FieldHistory) int {
	cur, ok := h.Current()
	if !ok {
		return -1
	}
	for i := len(h.Entries) - 1; i >= 0; i-- {
		if e := h.Entries[i]; e.Evidence.Commit == cur.Evidence.Commit && !e.Yield {
			return i
		}
	}
	return -1
}

func problemsOf(b *ledger.Branch) ([]problemReport, error) {
	probs, err := b.Problems()
	if err != nil {
		return nil, err
	}
	out := make([]problemReport, 0, len(probs))
	for _, p := range probs {
		out = append(out, problemReport{Commit: p.Commit, Path: p.Path, Line: p.Line, Key: p.Key, Value: p.Value, Message: p.Message})
	}
	return out, nil
}

// writeLedgerJSON streams the ledgerReport: the head, then each field as EachField hands it over,
// then the problems. Each piece has the bytes the whole report would have had from encoding/json
// (TestLedgerJSONIsOneDocument holds it to that): the head and the problems through
// json.MarshalIndent with the nesting's prefix, the fields, nearly all of the output, through
// appendFieldJSON, which writes those same bytes without reflection.
func writeLedgerJSON(ctx context.Context, out io.Writer, b *ledger.Branch, head ledgerHead, pattern core.FieldPattern) error {
	w := bufio.NewWriterSize(out, 64<<10)
	str := func(s string) []byte { j, _ := json.Marshal(s); return j }
	update, err := json.MarshalIndent(head.Update, "  ", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "{\n  \"branch\": %s,\n  \"tip\": %s,\n  \"commits\": %d,\n  \"update\": %s,\n  \"fields\": [",
		str(head.Branch), str(head.Tip), head.Commits, update)
	n := 0
	var j []byte
	err = b.EachField(ctx, pattern, func(h ledger.FieldHistory) error {
		j, err = appendFieldJSON(j[:0], h)
		if err != nil {
			return fmt.Errorf("field %s: %w", h.Field, err)
		}
		if n > 0 {
			w.WriteByte(',')
		}
		n++
		w.WriteString("\n" + fieldPrefix)
		_, err = w.Write(j)
		return err
	})
	if err != nil {
		return err
	}
	if n > 0 {
		w.WriteString("\n  ")
	}
	probs, err := problemsOf(b)
	if err != nil {
		return err
	}
	pj, err := json.MarshalIndent(probs, "  ", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "],\n  \"problems\": %s\n}\n", pj)
	return w.Flush()
}

func short(hash string) string {
	if len(hash) > 8 {
		return hash[:8]
	}
	return hash
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clip shortens long values (a whole IAM policy, say) for the text table; --json has them whole.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

func (c claimReport) kind() string {
	switch {
	case c.Claim.Yield:
		return "yield"
	case c.Claim.Evidence.Explicit && c.Changed:
		return "explicit"
	case c.Claim.Evidence.Explicit:
		return "explicit, unchanged"
	}
	return "implicit"
}

func (c claimReport) value() string {
	if c.Claim.Yield {
		return "(yield)"
	}
	return clip(c.Claim.Value.String(), 48)
}

func (c claimReport) intent() string {
	if !c.IntentDeclared {
		return string(c.Claim.Intent) + " (undeclared)"
	}
	return string(c.Claim.Intent)
}

const timeLayout = "2006-01-02 15:04"

func writeLedgerText(ctx context.Context, out io.Writer, b *ledger.Branch, head ledgerHead, pattern core.FieldPattern, all bool, pol *policy.Policy) error {
	total, err := b.CountFields(ctx, pattern)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(out, 64<<10)
	fmt.Fprintf(w, "Ledger of %s at %s: %d commits on the first-parent history", strings.TrimPrefix(head.Branch, "refs/heads/"),
		short(head.Tip), head.Commits)
	switch {
	case head.Update.Rebuilt:
		fmt.Fprintf(w, " (rewritten since the last update: rebuilt)")
	case head.Update.PathsChanged:
		fmt.Fprintf(w, " (the policy's ledger paths changed: rebuilt)")
	case head.Update.Commits > 0 && head.Update.From != "":
		fmt.Fprintf(w, " (%d new since %s)", head.Update.Commits, short(head.Update.From))
	}
	fmt.Fprintf(w, ", %d fields. Times are UTC.\n", total)
	hidden := 0
	err = b.EachField(ctx, pattern, func(h ledger.FieldHistory) error {
		if !all && len(h.Entries) < 2 {
			hidden++
			return nil
		}
		writeFieldText(w, fieldOf(h), pol)
		return nil
	})
	if err != nil {
		return err
	}
	probs, err := problemsOf(b)
	if err != nil {
		return err
	}
	if hidden > 0 {
		fmt.Fprintf(w, "\n%d more fields have a single claim, from the commit that created them (--all shows them).\n", hidden)
	}
	if len(probs) > 0 {
		fmt.Fprintf(w, "\nProblems (%d):\n", len(probs))
		for _, p := range probs {
			where := short(p.Commit)
			if p.Path != "" {
				where += " " + p.Path
			}
			if p.Line > 0 {
				where += fmt.Sprintf(" line %d", p.Line)
			}
			if p.Key != "" {
				where += " " + p.Key
			}
			if p.Value != "" {
				where += fmt.Sprintf(" %q", p.Value)
			}
			fmt.Fprintf(w, "  %s: %s\n", where, p.Message)
		}
	}
	return w.Flush()
}

// authorText is a commit's author email, marked when the commit proves nothing under pol, the
// branch's policy: unsigned, or signed by a key no actor lists for that email (a valid SSH
// signature carries its own key, so it verifies whoever made it). Such a commit counts as no actor
// (docs/policy.md, "Commits prove who made them"), and the table says so rather than show a name
// arbitration would not accept. Without a policy no key is listed, so only a vouched identity is
// proven.
func authorText(id core.Identity, pol *policy.Policy) string {
	if id.Source != core.SourceGitAuthor || id.Proof.Vouched != "" {
		return id.ID
	}
	if pol != nil && (pol.TrustUnsignedGitAuthors || id.Proof.Key != "" && slices.ContainsFunc(pol.Actors, func(a *policy.Actor) bool { return a.KeySignsAs(id.Proof.Key, id.ID) })) {
		return id.ID
	}
	return id.ID + " (unverified)"
}

// ledgerPolicy is the policy on branch that proves authors (authorText), or nil when the branch
// has none or it does not parse: then nothing is proven by a key.
func ledgerPolicy(l *ledger.Ledger, branch string) *policy.Policy {
	src, ok, err := l.FileAt(branch, policy.DefaultFile)
	if err != nil || !ok {
		return nil
	}
	pol, err := policy.Parse(src, policy.DefaultFile)
	if err != nil {
		return nil
	}
	return pol
}

// writeFieldText writes one field's history as a table and the claim Git holds now.
func writeFieldText(out io.Writer, fr fieldReport, pol *policy.Policy) {
	fmt.Fprintf(out, "\n%s\n", fr.Field)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  COMMIT\tTIME\tAUTHOR\tVALUE\tINTENT\tMOTIVATION\tCLAIM\tEXPIRES\tPR")
	for _, c := range fr.History {
		exp, pr := "-", "-"
		if !c.Claim.Expires.IsZero() {
			exp = c.Claim.Expires.UTC().Format(timeLayout)
		}
		if c.Claim.Evidence.PR != 0 {
			pr = fmt.Sprintf("#%d", c.Claim.Evidence.PR)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", short(c.Claim.Evidence.Commit), c.Claim.At.Format(timeLayout), authorText(c.Claim.Actor.Identity, pol),
			c.value(), c.intent(), orDash(c.Claim.Motivation.String()), c.kind(), exp, pr)
	}
	tw.Flush()
	if c := fr.Current; c != nil {
		fmt.Fprintf(out, "  Git holds %s, from %s by %s (%s", clip(c.Claim.Value.String(), 48), short(c.Claim.Evidence.Commit), c.Claim.Actor.Identity.ID, c.intent())
		if !c.Claim.Motivation.IsZero() {
			fmt.Fprintf(out, ", %s", c.Claim.Motivation)
		}
		if !c.Claim.Expires.IsZero() {
			fmt.Fprintf(out, ", expires %s", c.Claim.Expires.UTC().Format(timeLayout))
		}
		fmt.Fprintln(out, ")")
	} else {
		fmt.Fprintln(out, "  Git holds no value of its own: the field is only claimed, never written")
	}
}
