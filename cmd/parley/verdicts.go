package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/driftstate"
)

func newVerdictsCmd() *cobra.Command {
	var (
		statePath, field string
		asJSON, timers   bool
	)
	cmd := &cobra.Command{
		Use:   "verdicts [--state FILE] [--field FIELD]",
		Short: "List the drift verdicts parley serve (or parley ingest --state) recorded, with their evidence",
		Long: `Verdicts reads the drift state (drift.db beside parley serve's store, or the file given to
parley ingest --state) and lists every verdict on a live change, oldest first: when, the field, the
decision and the rule, the winner, what it wrote to Git (a gate, a resume, an adoption: the commit
and pull request) or why nothing, and the events it rests on. A verdict restated by later events of
the same kind (the HPA rescaling its own field) is one line with all of its evidence. --timers lists
the fields waiting to be judged again instead.`,
		Example: `  parley verdicts --state /var/lib/parley/drift.db
  parley verdicts --state drift.db --field 'k8s:apps/Deployment/prod/web#/spec/replicas' --json
  parley verdicts --state drift.db --timers`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			var f core.Field
			if field != "" {
				var err error
				if f, err = core.ParseField(field); err != nil {
					return usageErr(fmt.Errorf("--field: %w", err))
				}
			}
			if _, err := os.Stat(statePath); errors.Is(err, os.ErrNotExist) {
				return usageErr(fmt.Errorf("--state %s: no such file (parley serve keeps drift.db beside its store)", statePath))
			}
			st, err := driftstate.Open(ctx, statePath)
			if err != nil {
				return err
			}
			defer st.Close()
			out := cmd.OutOrStdout()
			if timers {
				ts, err := st.Timers(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					if ts == nil {
						ts = []driftstate.Timer{}
					}
					return writeJSON(out, ts)
				}
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "DUE\tFIELD\tWHY")
				for _, t := range ts {
					if f.IsZero() || t.Field == f {
						fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Due.Format(time.RFC3339), t.Field, t.Why)
					}
				}
				return tw.Flush()
			}
			recs, err := st.Verdicts(ctx, f)
			if err != nil {
				return err
			}
			if asJSON {
				if recs == nil {
					recs = []driftstate.Record{}
				}
				return writeJSON(out, recs)
			}
			if len(recs) == 0 {
				fmt.Fprintln(out, "No drift verdicts recorded.")
				return nil
			}
			for _, r := range recs {
				v := r.Verdict
				fmt.Fprintf(out, "%s  %s\n", r.At.Format(time.RFC3339), v.Field)
				fmt.Fprintf(out, "  decision: %s (%s)\n", v.Decision, v.Rule)
				if v.Winner != nil {
					fmt.Fprintf(out, "  winner:   %s wants %s\n", v.Winner.Actor, v.Winner.Value)
				}
				switch {
				case r.Commit != "" && r.PR != 0:
					fmt.Fprintf(out, "  git:      %s, commit %s on %s, pull request #%d\n", r.Action, short(r.Commit), r.Branch, r.PR)
				case r.Commit != "":
					fmt.Fprintf(out, "  git:      %s, commit %s on %s\n", r.Action, short(r.Commit), r.Branch)
				case r.Note != "":
					fmt.Fprintf(out, "  git:      %s\n", r.Note)
				}
				fmt.Fprintf(out, "  evidence: %s\n", evidenceList(r.Evidence))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&statePath, "state", "drift.db", "the drift state file")
	f.StringVar(&field, "field", "", "only this field")
	f.BoolVar(&timers, "timers", false, "list the timers instead: fields waiting to be judged again, and when")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// evidenceList shows the first and last few events of a long list.
func evidenceList(ev []string) string {
	if len(ev) <= 6 {
		return strings.Join(ev, ", ")
	}
	return strings.Join(ev[:3], ", ") + fmt.Sprintf(", ... (%d more) ..., ", len(ev)-6) + strings.Join(ev[len(ev)-3:], ", ")
}
