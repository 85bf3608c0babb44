package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/app/inspect"
	"github.com/parleyhq/parley/app/pages"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/driftstate"
)

func newReportCmd() *cobra.Command {
	var repo, field, out, at, state string
	cmd := &cobra.Command{
		Use:   "report --out DIR [--repo DIR] [--field PATTERN]",
		Short: "Write a field's owners, claims and verdict as static HTML pages, with timeline pictures",
		Long: `Report writes, for a local repository, the pages parley serve shows behind sign-in: an index of the
fields with claims and the gates Parley wrote, and for each field its verdict with every rule's outcome
and a timeline picture of its claims (who held it when, which values it took, the freezes, holds and
gates in force). The pages are plain HTML with inline SVG, no script and nothing fetched from
elsewhere: open DIR/index.html in a browser, or publish the directory.

The verdicts are decided under the policy on the repository's default branch, at --at (default now),
from the claims in the repository's Git ledger and, with --state, the live claims of a drift state
(parley serve's drift.db, or one parley ingest --apply wrote), whose drift verdicts are then shown
with their evidence too.`,
		Example: `  parley demo --dir /tmp/demo && parley report --repo /tmp/demo --out /tmp/demo-report
  parley report --repo ./infra --field 'k8s:apps/Deployment/prod/*#/spec/replicas' --out report
  parley report --repo ./infra --state /var/lib/parley/drift.db --out report`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageErr(errors.New("--out DIR is required: the directory to write the pages to"))
			}
			var pattern core.FieldPattern
			if field != "" {
				p, err := core.ParseFieldPattern(field)
				if err != nil {
					return usageErr(fmt.Errorf("--field: %w", err))
				}
				pattern = p
			}
			now := time.Now().UTC()
			if at != "" {
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return usageErr(fmt.Errorf("--at %q: want an RFC 3339 time such as 2026-11-22T10:00:00Z", at))
				}
				now = t.UTC()
			}
			r, err := openRepo(cmd, repo)
			if err != nil {
				return err
			}
			defer r.Close()
			src, name, err := r.policySource()
			if err != nil {
				return usageErr(err)
			}
			pol, err := parsePolicy(cmd, src, name)
			if err != nil {
				return err
			}
			files, _, err := reconcile.ReadFiles(r.dir, "refs/heads/"+r.branch)
			if err != nil {
				return err
			}
			abs, _ := filepath.Abs(repo)
			source := inspect.Source{Repository: filepath.Base(abs), Ledger: r, Policy: pol, Files: files}
			if state != "" {
				if _, err := os.Stat(state); err != nil {
					return usageErr(fmt.Errorf("--state: %w", err))
				}
				st, err := driftstate.Open(cmd.Context(), state)
				if err != nil {
					return usageErr(fmt.Errorf("--state: %w", err))
				}
				defer st.Close()
				source.Drift = st
			}
			ins := inspect.New(source)
			idx, fields, err := ins.Index(pattern, now, 0)
			if err != nil {
				return err
			}
			if len(fields) == 0 && field != "" {
				return usageErr(fmt.Errorf("no field with claims matches %s", field))
			}
			n, err := writeReport(out, idx, fields)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d pages to %s: open %s\n", n, out, filepath.Join(out, "index.html"))
			return nil
		},
	}
	cmd.Flags().StringVar(&repo, "repo", ".", "the repository")
	cmd.Flags().StringVar(&field, "field", "", "only the fields matching this pattern (default: every field with claims)")
	cmd.Flags().StringVar(&out, "out", "", "the directory to write the pages to (created; pages in it are replaced)")
	cmd.Flags().StringVar(&at, "at", "", "decide the verdicts at this RFC 3339 time (default now)")
	cmd.Flags().StringVar(&state, "state", "", "a drift state (drift.db) whose live claims and drift verdicts to show")
	return cmd
}

// writeReport writes index.html and fields/<name>.html into dir, each page complete in a
// temporary file first, so that an interrupted report leaves whole pages only.
func writeReport(dir string, idx pages.Index, fields []pages.Field) (int, error) {
	if err := os.MkdirAll(filepath.Join(dir, "fields"), 0o755); err != nil {
		return 0, fmt.Errorf("--out: %w", err)
	}
	fromIndex := pages.Links{Field: func(f core.Field) string { return "fields/" + pageName(f) }}
	fromField := pages.Links{Index: "../index.html", Field: func(f core.Field) string { return pageName(f) }}
	write := func(path string, render func(*bytes.Buffer) error) error {
		var buf bytes.Buffer
		if err := render(&buf); err != nil {
			return fmt.Errorf("render %s: %w", path, err)
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, path)
	}
	for _, f := range fields {
		if err := write(filepath.Join(dir, "fields", pageName(f.Field)), func(b *bytes.Buffer) error { return pages.RenderField(b, f, fromField) }); err != nil {
			return 0, err
		}
	}
	if err := write(filepath.Join(dir, "index.html"), func(b *bytes.Buffer) error { return pages.RenderIndex(b, idx, fromIndex) }); err != nil {
		return 0, err
	}
	return len(fields) + 1, nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// pageName is a field's page file name: readable, safe on every file system, and unique (a
// short hash of the address tells apart fields whose readable parts collide).
func pageName(f core.Field) string {
	s := f.String()
	sum := sha256.Sum256([]byte(s))
	readable := unsafeName.ReplaceAllString(s, "_")
	if len(readable) > 120 {
		readable = readable[:120]
	}
	return readable + "-" + hex.EncodeToString(sum[:4]) + ".html"
}
