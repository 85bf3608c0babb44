package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/utils/diff"
	"github.com/sergi/go-diff/diffmatchpatch"
	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/driftstate"
	"github.com/parleyhq/parley/reconcile/events"
	"github.com/parleyhq/parley/trailers/ledger"
)

func newIngestCmd() *cobra.Command {
	var render *renderFlags // set once the flags are registered, below
	var (
		dir, source, policyPath, at, statePath, author string
		apply, asJSON                                  bool
	)
	cmd := &cobra.Command{
		Use:   "ingest FILE...",
		Short: "Replay saved drift events through Parley and show the verdicts and the Git changes",
		Long: `Ingest replays saved events offline through the same code path as parley serve's /events
endpoints: each body is decoded, its field changes become claims, every touched field is judged
against the repository's ledger under its policy, and the verdict is turned into the Git change it
asks for (a per-field gate in the Argo CD Application or Flux Kustomization that applies the object,
the gate's removal, or the live value adopted into the manifest or .tf file).

A FILE holds one event body (a Kubernetes audit EventList, a Flux event, an Argo CD notification
from Parley's template, a CloudTrail record, Records file or EventBridge envelope) or several, one
after another (JSON lines). The source is recognised from the body unless --source names it. "-"
reads standard input. The managed clusters' log pipelines are read too, and their events replayed
as serve judges them: the S3 backup objects Amazon Data Firehose writes what it could not deliver
to (JSON lines with rawData, gzip or not), Firehose requests, CloudWatch Logs subscription
messages, Pub/Sub pushes and GKE audit LogEntries.

Bodies are replayed in the order given (name files oldest first). Each is judged at the time of its
newest event (--at changes that), and expiry timers that came due before it fire first, even when
none of its events touches a field (a body of lease renewals still moves the clock), so a day's
events replay as they happened. With --apply each change is one commit on the checked-out branch
(files with uncommitted changes are refused). Without it the repository is not touched: the changes
are printed as diffs, and made in a throwaway clone so that later bodies are judged with them (a gate
planned for one body can be resumed by a later one). The drift state (events taken in, claims,
verdicts, timers) lives in memory unless --state names a file to keep it in.

` + renderHelp + `
A chart not rendered is left out of discovery: its objects are not gated or adopted until it renders.`,
		Example: `  parley ingest audit.json --repo ./infra
  parley ingest flux-events.jsonl cloudtrail.json --repo ./infra --apply
  aws s3 cp --recursive s3://parley-firehose-backup/http-endpoint-failed/ failed/ && parley ingest failed/*/*/*/*/* --repo ./infra
  kubectl get --raw ... | parley ingest - --source k8s-audit --at now`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if source != "" && !contains(reconcile.Sources(), source) {
				return usageErr(fmt.Errorf("--source %q: want one of %s", source, strings.Join(reconcile.Sources(), ", ")))
			}
			var fixed time.Time
			switch at {
			case "", "event":
			case "now":
				fixed = time.Now().UTC()
			default:
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return usageErr(fmt.Errorf("--at %q: want event, now or an RFC 3339 time", at))
				}
				fixed = t.UTC()
			}
			sig, err := parseAuthor(author)
			if err != nil {
				return usageErr(err)
			}
			bodies, err := readBodies(args, cmd.InOrStdin())
			if err != nil {
				return usageErr(err)
			}
			var envelopes []ingestBatch
			if source == "" {
				if bodies, envelopes, err = unwrapEnvelopes(bodies); err != nil {
					return usageErr(err)
				}
			}
			repo, err := git.PlainOpen(dir)
			if err != nil {
				return usageErr(fmt.Errorf("--repo %s: %w", dir, err))
			}
			head, err := repo.Head()
			if err != nil {
				return usageErr(fmt.Errorf("--repo %s: HEAD: %w", dir, err))
			}
			branch := head.Name().Short()
			var pol *policy.Policy
			if policyPath != "" {
				if pol, err = policy.LoadFile(policyPath); err != nil {
					return findingsErr(err)
				}
			}
			led, err := reconcile.OpenLedger(dir, branch, "", ledger.Options{})
			if err != nil {
				return fmt.Errorf("open ledger: %w", err)
			}
			if !apply {
				// A dry run commits into a throwaway clone instead, so each body is judged with the
				// changes the earlier ones would have made (a gate planned at 10:00 is there to be
				// resumed at 12:00), and the repository itself is never touched.
				scratch, err := scratchClone(ctx, dir, branch, led)
				if err != nil {
					return err
				}
				defer os.RemoveAll(scratch)
				if led, err = reconcile.OpenLedger(scratch, branch, "", ledger.Options{}); err != nil {
					return fmt.Errorf("open ledger of the scratch clone: %w", err)
				}
				dir = scratch
			}
			defer led.Close()
			if statePath == "" {
				statePath = ":memory:"
			}
			st, err := driftstate.Open(ctx, statePath)
			if err != nil {
				return err
			}
			defer st.Close()
			var now time.Time
			rec := &reconcile.Reconciler{State: st, Now: func() time.Time { return now },
				Writer: &reconcile.LocalWriter{Dir: dir, Author: sig, Now: func() time.Time { return now }}}
			helm, closeWorkers, err := render.renderer()
			if err != nil {
				return err
			}
			defer closeWorkers()
			load := func() (reconcile.Snapshot, error) {
				snap, err := reconcile.LoadSnapshot(ctx, dir, branch, ".parley/policy.hcl", led, pol)
				snap.Helm = helm // before its managers are discovered, which is when charts render
				return snap, err
			}
			out := envelopes
			for _, b := range bodies {
				snap, err := load()
				if err != nil {
					return err
				}
				src := source
				if b.source != "" {
					src = b.source
				}
				if src == "" {
					if src, err = events.Sniff(b.body); err != nil {
						return usageErr(fmt.Errorf("%s: %w", b.where, err))
					}
				}
				batch, err := reconcile.Decode(src, b.body, snap.Files)
				if err != nil {
					return usageErr(fmt.Errorf("%s: %w", b.where, err))
				}
				now = fixed
				if now.IsZero() {
					// The newest event, relevant or not: a body of only irrelevant events still
					// moves the clock, so the timers due by then fire before it, as in the server.
					now = newestEvent(batch)
				}
				if now.IsZero() {
					out = append(out, ingestBatch{Where: b.where, Source: src, Ignored: batch.Ignored, Problems: batch.Problems})
					continue // no event says when it happened, so no time to judge at
				}
				// Timers that came due before this body fire first, as the server's timer loop would.
				if due, err := st.Due(ctx, now); err != nil {
					return err
				} else if len(due) > 0 {
					var fields []core.Field
					for _, t := range due {
						fields = append(fields, t.Field)
					}
					rep, err := rec.Recheck(ctx, snap, fields)
					if err != nil {
						return err
					}
					out = append(out, ingestBatch{Where: "timers due by " + now.Format(time.RFC3339), Source: "timer", At: now, Results: results(rep, apply)})
					if snap, err = load(); err != nil {
						return err
					}
				}
				rep, err := rec.Ingest(ctx, snap, batch)
				if err != nil {
					return fmt.Errorf("%s: %w", b.where, err)
				}
				out = append(out, ingestBatch{Where: b.where, Source: src, At: now, Duplicates: rep.Duplicates,
					Ignored: rep.Ignored, Problems: batch.Problems, Reverts: len(rep.Reverts), Results: results(rep, apply)})
			}
			timers, err := st.Timers(ctx)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					Batches []ingestBatch      `json:"batches"`
					Timers  []driftstate.Timer `json:"timers"`
				}{out, timers})
			}
			printIngest(w, out, timers, apply)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "repo", ".", "the GitOps repository (its checked-out branch is judged and, with --apply, written)")
	f.StringVar(&source, "source", "", "the bodies' source: "+strings.Join(reconcile.Sources(), ", ")+" (default: recognised from each body)")
	f.StringVar(&policyPath, "policy", "", "policy file to use instead of the branch's .parley/policy.hcl")
	f.StringVar(&at, "at", "event", "when to judge: event (each body's newest event), now, or an RFC 3339 time")
	f.StringVar(&statePath, "state", "", "drift state file to keep between runs (default: in memory)")
	f.StringVar(&author, "author", "Parley <parley@localhost>", "author of the commits --apply makes")
	f.BoolVar(&apply, "apply", false, "commit the changes to the checked-out branch")
	f.BoolVar(&asJSON, "json", false, "print the batches as JSON")
	render = addRenderFlags(cmd)
	return cmd
}

// scratchClone clones branch of the repository at dir into a temporary directory, with the
// ledger's index copied along (same commits, so the index stays valid and only new commits are
// read). The caller removes the directory.
func scratchClone(ctx context.Context, dir, branch string, led *ledger.Ledger) (string, error) {
	if _, err := led.Update(ctx, branch); err != nil {
		return "", fmt.Errorf("update the ledger of %s: %w", branch, err)
	}
	index := led.Path()
	if err := led.Close(); err != nil {
		return "", err
	}
	scratch, err := os.MkdirTemp("", "parley-ingest-")
	if err != nil {
		return "", err
	}
	fail := func(err error) (string, error) {
		os.RemoveAll(scratch)
		return "", err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fail(err)
	}
	if _, err := git.PlainCloneContext(ctx, scratch, false, &git.CloneOptions{URL: abs,
		ReferenceName: plumbing.NewBranchReferenceName(branch), SingleBranch: true, Tags: git.NoTags}); err != nil {
		return fail(fmt.Errorf("clone %s for a dry run: %w", dir, err))
	}
	to := filepath.Join(scratch, ".git", "parley")
	if err := os.MkdirAll(to, 0o755); err != nil {
		return fail(err)
	}
	for _, suffix := range []string{"", "-wal"} { // the index and whatever its log still holds
		b, err := os.ReadFile(index + suffix)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fail(err)
		}
		if err := os.WriteFile(filepath.Join(to, filepath.Base(index)+suffix), b, 0o644); err != nil {
			return fail(err)
		}
	}
	return scratch, nil
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func parseAuthor(s string) (object.Signature, error) {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name == "" {
		return object.Signature{}, fmt.Errorf("--author %q: want \"Name <email>\"", s)
	}
	return object.Signature{Name: a.Name, Email: a.Address}, nil
}

type body struct {
	where  string
	body   []byte
	source string // set for the bodies an envelope held
}

// unwrapEnvelopes replaces each body that is a log pipeline's envelope (a Firehose request, a
// line of the S3 backup Firehose writes what it could not deliver to, a CloudWatch Logs
// subscription message, a Pub/Sub push, a GKE audit LogEntry) with the audit EventLists and
// CloudTrail Records files it holds, which replay as the server judges them. An envelope of
// nothing relevant is reported with what it left out.
func unwrapEnvelopes(in []body) ([]body, []ingestBatch, error) {
	var out []body
	var empty []ingestBatch
	for _, b := range in {
		inner, ignored, ok, err := events.Unwrap(b.body)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", b.where, err)
		}
		if !ok {
			out = append(out, b)
			continue
		}
		src, _ := events.Sniff(b.body)
		if len(inner) == 0 {
			empty = append(empty, ingestBatch{Where: b.where, Source: src, Ignored: ignored, Results: []ingestResult{}})
		}
		for i, ib := range inner {
			out = append(out, body{where: fmt.Sprintf("%s (%s part %d)", b.where, src, i+1), body: ib.Body, source: ib.Source})
		}
	}
	return out, empty, nil
}

// readBodies reads every JSON value of every file: one body per value, so a file may hold one
// event or JSON lines of many.
func readBodies(paths []string, stdin io.Reader) ([]body, error) {
	var out []body
	for _, p := range paths {
		var data []byte
		var err error
		if p == "-" {
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(p)
		}
		if err != nil {
			return nil, err
		}
		// Firehose's S3 backup objects are gzip when the bucket's compression is on.
		budget := int64(1 << 30)
		if data, err = events.Gunzip(data, &budget); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		for n := 1; ; n++ {
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if errors.Is(err, io.EOF) {
				if n == 1 {
					return nil, fmt.Errorf("%s: no event in the file", p)
				}
				break
			}
			if err != nil {
				// The bad value starts at the first non-blank byte after the last good one.
				off := int(dec.InputOffset())
				for off < len(data) && (data[off] == ' ' || data[off] == '\n' || data[off] == '\r' || data[off] == '\t') {
					off++
				}
				line := 1 + bytes.Count(data[:off], []byte("\n"))
				return nil, fmt.Errorf("%s: body %d (line %d): not JSON: %w", p, n, line, err)
			}
			out = append(out, body{where: fmt.Sprintf("%s#%d", p, n), body: raw})
		}
	}
	return out, nil
}

// newestEvent is the time of the batch's latest event: the replay judges each body as of then.
func newestEvent(b events.Batch) time.Time {
	t := b.Latest
	for _, o := range b.Observations {
		if o.At.After(t) {
			t = o.At
		}
	}
	for _, r := range b.Reverts {
		if r.At.After(t) {
			t = r.At
		}
	}
	for _, o := range b.OutOfSync {
		if o.At.After(t) {
			t = o.At
		}
	}
	return t.UTC()
}

type ingestBatch struct {
	Where      string         `json:"where"`
	Source     string         `json:"source"`
	At         time.Time      `json:"at,omitzero"`
	Duplicates int            `json:"duplicates,omitempty"`
	Ignored    map[string]int `json:"ignored,omitempty"`
	Problems   []string       `json:"problems,omitempty"` // events read but not judged, naming their objects
	Reverts    int            `json:"reverts,omitempty"`
	Results    []ingestResult `json:"results"`
}

type ingestResult struct {
	Verdict core.Verdict      `json:"verdict"`
	Action  string            `json:"action,omitempty"`
	Files   []string          `json:"files,omitempty"`
	Diff    map[string]string `json:"diff,omitempty"`
	Message string            `json:"message,omitempty"`
	Commit  string            `json:"commit,omitempty"`
	Note    string            `json:"note,omitempty"`
}

// results renders a report; commits of a dry run (made in its scratch clone) are not reported.
func results(rep reconcile.Report, applied bool) []ingestResult {
	out := []ingestResult{}
	for _, r := range rep.Results {
		ir := ingestResult{Verdict: r.Verdict, Note: r.Note}
		if c := r.Change; c != nil {
			ir.Action, ir.Files, ir.Message, ir.Diff = string(c.Action), c.Files, c.Message, map[string]string{}
			for _, f := range c.Files {
				ir.Diff[f] = unifiedDiff(f, c.Diff[f][0], c.Diff[f][1])
			}
		}
		if applied && r.Landed != nil && r.Landed.Committed {
			ir.Commit = r.Landed.Commit
		}
		if !applied && r.Change != nil && r.Change.Action == reconcile.ActionPropose {
			// The dry run's proposal branch is in its throwaway clone.
			ir.Note = "with --apply the value is proposed on the branch " + r.Change.Branch + ", to push and open as a pull request"
		}
		out = append(out, ir)
	}
	return out
}

func printIngest(w io.Writer, batches []ingestBatch, timers []driftstate.Timer, applied bool) {
	changes := 0
	for _, b := range batches {
		fmt.Fprintf(w, "== %s (%s)", b.Where, b.Source)
		if !b.At.IsZero() {
			fmt.Fprintf(w, " judged at %s", b.At.Format(time.RFC3339))
		}
		fmt.Fprintln(w)
		if b.Duplicates > 0 {
			fmt.Fprintf(w, "   %d event(s) taken in before: skipped\n", b.Duplicates)
		}
		if len(b.Ignored) > 0 {
			fmt.Fprintf(w, "   ignored: %s\n", ignoredList(b.Ignored))
		}
		for _, p := range b.Problems {
			fmt.Fprintf(w, "   not judged: %s\n", p)
		}
		if b.Reverts > 0 {
			fmt.Fprintf(w, "   %d object(s) reverted by the GitOps tool: the live claims on them ended, except on gated fields\n", b.Reverts)
		}
		for _, r := range b.Results {
			v := r.Verdict
			fmt.Fprintf(w, "%s\n  decision: %s (%s)\n", v.Field, v.Decision, v.Rule)
			if v.Winner != nil {
				fmt.Fprintf(w, "  winner:   %s wants %s\n", v.Winner.Actor, v.Winner.Value)
			}
			if !v.Until.IsZero() {
				fmt.Fprintf(w, "  until:    %s\n", v.Until.Format(time.RFC3339))
			}
			for _, s := range v.Explanation {
				if !boringOutcome[s.Outcome] {
					fmt.Fprintf(w, "  why:      [%s] %s\n", s.Rule, s.Detail)
				}
			}
			if r.Action == "" {
				fmt.Fprintf(w, "  git:      %s\n", r.Note)
				continue
			}
			changes++
			state := "would commit"
			if r.Commit != "" {
				state = "committed " + r.Commit[:12]
			} else if applied {
				state = "nothing to commit"
			}
			fmt.Fprintf(w, "  git:      %s %s (%s)\n", r.Action, strings.Join(r.Files, ", "), state)
			if r.Note != "" {
				fmt.Fprintf(w, "            %s\n", r.Note)
			}
			for _, f := range r.Files {
				for _, line := range strings.Split(strings.TrimRight(r.Diff[f], "\n"), "\n") {
					fmt.Fprintf(w, "            %s\n", line)
				}
			}
		}
	}
	if len(timers) > 0 {
		fmt.Fprintln(w, "== timers still set")
		for _, t := range timers {
			fmt.Fprintf(w, "%s  %s  %s\n", t.Due.Format(time.RFC3339), t.Field, t.Why)
		}
	}
	if !applied && changes > 0 {
		fmt.Fprintf(w, "%d change(s) planned; run again with --apply to commit them.\n", changes)
	}
}

// boringOutcome lists the explanation outcomes the text output leaves out (--json has them all).
var boringOutcome = map[string]bool{"applies": true, "passed": true, "not applicable": true, "not needed": true,
	"not reached": true, "no match": true, "skipped": true, "none": true}

func ignoredList(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// elidedLine marks an unchanged line too far from any change to show.
const elidedLine diffmatchpatch.Operation = 99

// unifiedDiff renders old -> new as a unified diff with three lines of context (go-git's own line
// diff, the one `git diff` output of go-git is built on).
func unifiedDiff(name string, old, new []byte) string {
	type line struct {
		op   diffmatchpatch.Operation
		text string
	}
	var lines []line
	for _, d := range diff.Do(string(old), string(new)) {
		for _, l := range strings.SplitAfter(d.Text, "\n") {
			if l != "" {
				lines = append(lines, line{d.Type, strings.TrimSuffix(l, "\n")})
			}
		}
	}
	const context = 3
	var b strings.Builder
	fmt.Fprintf(&b, "--- a/%s\n+++ b/%s\n", name, name)
	// A line is shown when a changed line is within context lines of it.
	show := make([]bool, len(lines))
	for i, l := range lines {
		if l.op == diffmatchpatch.DiffEqual {
			continue
		}
		for j := max(0, i-context); j <= min(len(lines)-1, i+context); j++ {
			show[j] = true
		}
	}
	for i := range lines {
		if !show[i] {
			lines[i].op = elidedLine
		}
	}
	elided := false
	for _, l := range lines {
		switch l.op {
		case elidedLine:
			if !elided {
				b.WriteString("@@\n")
			}
			elided = true
			continue
		case diffmatchpatch.DiffInsert:
			b.WriteString("+" + l.text + "\n")
		case diffmatchpatch.DiffDelete:
			b.WriteString("-" + l.text + "\n")
		default:
			b.WriteString(" " + l.text + "\n")
		}
		elided = false
	}
	return b.String()
}
