package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/go-git/go-git/v5"
	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/gitops"
)

// discoverReport is what parley discover --json prints (docs/schemas/discover.schema.json).
type discoverReport struct {
	Origin   string            `json:"origin,omitempty"` // absent when unknown: no origin remote, or one naming no host
	Managers []discoverManager `json:"managers"`
	Problems []string          `json:"problems"`
	Object   *discoverObject   `json:"object,omitempty"`
}

type discoverManager struct {
	Kind      string   `json:"kind"`
	Name      string   `json:"name"`
	Namespace string   `json:"namespace,omitempty"`
	File      string   `json:"file"`
	Paths     []string `json:"paths"`
}

// discoverObject is where the object --object names comes from.
type discoverObject struct {
	Field        string            `json:"field"`
	Found        bool              `json:"found"` // a manifest, a kustomization build or a chart in the repository defines it
	Manifest     string            `json:"manifest,omitempty"`
	Built        string            `json:"built,omitempty"`
	Chart        string            `json:"chart,omitempty"`
	RemoteCharts []string          `json:"remote_charts"` // when not found: releases of charts Parley does not fetch that install into its namespace
	Managers     []discoverManager `json:"managers"`
}

func newDiscoverCmd() *cobra.Command {
	var dir, rev, object string
	var asJSON bool
	var render *renderFlags
	var budget core.Budget
	cmd := &cobra.Command{
		Use:   "discover [--repo DIR] [--rev REV] [--object OBJ]",
		Short: "Show the Argo CD and Flux managers Parley finds in a GitOps repository, and where an object comes from",
		Long: `Discover runs Parley's discovery on one revision of the repository (HEAD unless --rev names a branch,
tag or commit) and prints what it finds: every manager (Argo CD Application and ApplicationSet, Flux
Kustomization and HelmRelease) with the file holding it and the directories it applies, and the
problems met on the way (a file that does not parse, a kustomization kustomize refuses, a chart that
does not render, a source that reads another repository). This is what parley ingest and parley serve
see when they gate a field or adopt a live value, so it shows why an object is or is not gated.

The repository's origin remote is its own URL: a source naming another repository (an Argo CD
repoURL, a Flux GitRepository's url) is not read from this one, and is reported. Without an origin
remote, or with one that names no host (a local path), every source is taken to be this repository.

--object names a Kubernetes object in Parley's address syntax (docs/addresses.md), without a
#pointer: k8s:GROUP/KIND/NAMESPACE/NAME, core/KIND/... for the core group. Discover then says which
manifest defines it, the directory whose kustomization build gives it its final shape, the chart
that renders it, and the managers that apply it; or, for an object no file in the repository
defines, the releases of charts from chart repositories (which Parley does not fetch) that may
install it into its namespace.

` + renderHelp + `

Exit status 0 whatever discovery finds; 2 when the repository, the revision or --object cannot be
read.`,
		Example: `  parley discover --repo ./infra
  parley discover --object k8s:apps/Deployment/prod/web
  parley discover --repo ./infra --rev origin/main --object k8s:core/ConfigMap/prod/web-config --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var obj core.Field
			if object != "" {
				f, err := core.ParseField(object)
				if err != nil {
					return usageErr(fmt.Errorf("--object %q: %w", object, err))
				}
				if f.Scheme != core.SchemeKubernetes {
					return usageErr(fmt.Errorf("--object %q: not a Kubernetes object (want k8s:GROUP/KIND/NAMESPACE/NAME); discovery finds Argo CD and Flux objects", object))
				}
				if f.Path != "" {
					return usageErr(fmt.Errorf("--object %q: an object has no #pointer (want %s)", object, f.Object()))
				}
				obj = f
			}
			files, _, tooLarge, err := reconcile.ReadFilesWithin(dir, rev, budget)
			if err != nil {
				return usageErr(fmt.Errorf("--repo %s --rev %s: %w", dir, rev, err))
			}
			origin := originURL(dir)
			opts := gitops.Options{Origin: origin}
			var closeWorkers func()
			if opts.Helm, closeWorkers, err = render.renderer(); err != nil {
				return err
			}
			defer closeWorkers()
			inv, problems := gitops.DiscoverWith(cmd.Context(), files, opts)

			rep := discoverReport{Managers: discoverManagers(inv.Managers()), Problems: []string{}}
			if gitops.RepoKey(origin) != "" {
				rep.Origin = origin
			}
			rep.Problems = append(rep.Problems, tooLarge...)
			for _, p := range problems {
				rep.Problems = append(rep.Problems, p.Error())
			}
			if object != "" {
				o := &discoverObject{Field: obj.String(), RemoteCharts: []string{}}
				if pl, ok := inv.Locate(obj); ok {
					o.Found, o.Manifest, o.Built, o.Chart = true, pl.Manifest, pl.Built, pl.Chart
					o.Managers = discoverManagers(pl.Managers)
				} else if pl, ok := inv.RemoteReleases(obj); ok {
					o.RemoteCharts = append(o.RemoteCharts, pl.RemoteCharts...)
					o.Managers = discoverManagers(pl.Managers)
				} else {
					o.Managers = []discoverManager{}
				}
				rep.Object = o
			}

			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return printDiscover(out, rep, origin, obj)
		},
	}
	cmd.Flags().StringVar(&dir, "repo", ".", "the repository (a work tree, a directory in one, or a bare repository)")
	cmd.Flags().StringVar(&rev, "rev", "HEAD", "the revision to read: a branch, tag or commit")
	cmd.Flags().StringVar(&object, "object", "", "a Kubernetes object to locate, such as k8s:apps/Deployment/prod/web")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	render = addRenderFlags(cmd)
	cmd.Flags().Int64Var(&budget.FileBytes, "max-file-size", core.DefaultBudget().FileBytes, "the largest file read, in bytes; a larger one is named in the problems and left out")
	return cmd
}

// originURL is the first URL of the repository's origin remote, "" when it has none. The
// repository has been read already, so an error here only means there is no origin to know.
func originURL(dir string) string {
	repo, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		repo, err = git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true})
	}
	if err != nil {
		return ""
	}
	r, err := repo.Remote("origin")
	if err != nil || len(r.Config().URLs) == 0 {
		return ""
	}
	return r.Config().URLs[0]
}

func discoverManagers(ms []gitops.Manager) []discoverManager {
	out := make([]discoverManager, 0, len(ms))
	for _, m := range ms {
		paths := m.Paths
		if paths == nil {
			paths = []string{}
		}
		out = append(out, discoverManager{Kind: m.Target.Kind, Name: m.Target.Name, Namespace: m.Target.Namespace, File: m.File, Paths: paths})
	}
	return out
}

func (m discoverManager) target() string {
	return gitops.Target{Kind: m.Kind, Name: m.Name, Namespace: m.Namespace}.String()
}

func printDiscover(out io.Writer, rep discoverReport, origin string, obj core.Field) error {
	switch {
	case rep.Origin != "":
		fmt.Fprintf(out, "origin: %s\n", rep.Origin)
	case origin != "":
		fmt.Fprintf(out, "origin: unknown (the origin remote %s names no host): every source is taken to be this repository\n", origin)
	default:
		fmt.Fprintln(out, "origin: unknown (no origin remote): every source is taken to be this repository")
	}
	if len(rep.Managers) == 0 {
		fmt.Fprintln(out, "no managers: no Argo CD Application or ApplicationSet, Flux Kustomization or HelmRelease applies anything, so Parley gates nothing here")
	} else {
		tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MANAGER\tFILE\tAPPLIES")
		for _, m := range rep.Managers {
			applies := "-"
			if len(m.Paths) > 0 {
				applies = strings.Join(m.Paths, ", ")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", m.target(), m.File, applies)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(rep.Problems) > 0 {
		fmt.Fprintln(out, "problems:")
		for _, p := range rep.Problems {
			fmt.Fprintf(out, "  %s\n", p)
		}
	}
	o := rep.Object
	if o == nil {
		return nil
	}
	fmt.Fprintf(out, "\nobject: %s\n", o.Field)
	switch {
	case o.Found:
		fmt.Fprintf(out, "  manifest: %s\n", o.Manifest)
		if o.Built != "" {
			fmt.Fprintf(out, "  built:    %s (the kustomization build there gives the object its final shape)\n", o.Built)
		}
		if o.Chart != "" {
			fmt.Fprintf(out, "  chart:    %s (the manifest is a template of this chart, rendered with the release's values)\n", o.Chart)
		}
		if len(o.Managers) == 0 {
			fmt.Fprintln(out, "  managers: none: no Argo CD or Flux object in this repository applies it, so no gate can hold it")
		}
	case len(o.RemoteCharts) > 0:
		fmt.Fprintf(out, "  no manifest or chart in this repository defines it; it may come from these remote charts, installed into %s:\n", obj.Namespace)
		for _, c := range o.RemoteCharts {
			fmt.Fprintf(out, "    %s\n", c)
		}
	default:
		fmt.Fprintln(out, "  no manifest, chart or remote chart release in this repository defines it")
	}
	if len(o.Managers) > 0 {
		fmt.Fprintln(out, "  managers:")
		for _, m := range o.Managers {
			fmt.Fprintf(out, "    %s (%s)\n", m.target(), m.File)
		}
	}
	return nil
}
