package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/trailers/ledger"
)

// repoState is a repository's ledger, brought up to date with its default branch.
type repoState struct {
	*ledger.Ledger
	dir, branch string
}

// openRepo opens dir's ledger and updates it from the default branch.
func openRepo(cmd *cobra.Command, dir string) (*repoState, error) {
	return openRepoAt(cmd, dir, "")
}

// openRepoAt opens dir's ledger and updates it from branch (a local or remote-tracking branch),
// or from the default branch when branch is "".
func openRepoAt(cmd *cobra.Command, dir, branch string) (*repoState, error) {
	l, err := ledger.Open(dir, ledger.Options{})
	if errors.Is(err, ledger.ErrNotRepository) {
		return nil, usageErr(notRepository(dir, err))
	}
	if err != nil {
		return nil, fmt.Errorf("open ledger of %s: %w", dir, err)
	}
	if branch == "" {
		if branch, err = defaultBranch(dir, l); err != nil {
			l.Close()
			return nil, usageErr(err)
		}
	}
	if err := reconcile.UsePolicyPaths(l, branch, ""); err != nil {
		l.Close()
		return nil, err
	}
	if _, err := l.Update(cmd.Context(), branch); err != nil {
		l.Close()
		if errors.Is(err, ledger.ErrNoBranch) {
			return nil, usageErr(err)
		}
		return nil, fmt.Errorf("update ledger of %s from %s: %w", dir, branch, err)
	}
	return &repoState{Ledger: l, dir: dir, branch: branch}, nil
}

// policySource reads the policy from the default branch, never from the work tree: a pull
// request's head must not judge itself under its own policy.
func (r *repoState) policySource() ([]byte, string, error) {
	name := r.branch + ":" + policy.DefaultFile
	out, err := explainGit(r.dir, "show", name)
	if err != nil {
		if _, berr := explainGit(r.dir, "rev-parse", "--verify", "--quiet", r.branch+"^{commit}"); berr == nil {
			// The branch is there and the file is not: a repository Parley has not been set up in.
			return nil, name, fmt.Errorf("no %s on %s: run `parley init` to write a starter policy, then commit it and push it to %s "+
				"(the policy is read from that branch, never from the work tree, so a pull request cannot loosen it)",
				policy.DefaultFile, r.branch, strings.TrimPrefix(r.branch, "origin/"))
		}
		return nil, name, fmt.Errorf("read %s in %s: %w", name, r.dir, err)
	}
	return out, name, nil
}

// notRepository says that dir is not a Git repository and what to do instead of git's or the
// ledger's bare words.
func notRepository(dir string, err error) error {
	abs, aerr := filepath.Abs(dir)
	if aerr != nil {
		abs = dir
	}
	return fmt.Errorf("%s is not a git repository (nor is any directory above it): run parley in a checkout of your GitOps repository, "+
		"or name one with --repo DIR: %w", abs, err)
}

// requireRepository fails with notRepository when dir is not in a Git repository, before
// anything else is asked of it (a missing base branch would otherwise be reported first).
func requireRepository(dir string) error {
	if _, err := explainGit(dir, "rev-parse", "--git-dir"); err != nil {
		return notRepository(dir, ledger.ErrNotRepository)
	}
	return nil
}

// defaultBranch is the local branch origin's HEAD names when the repository has one, else main or
// master when they exist, else the branch HEAD points at. A checked-out pull request branch is thus
// never taken for the default branch when the usual names exist.
func defaultBranch(dir string, l *ledger.Ledger) (string, error) {
	var candidates []string
	if out, err := explainGit(dir, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD"); err == nil {
		candidates = append(candidates, strings.TrimPrefix(strings.TrimSpace(string(out)), "origin/"))
	}
	for _, b := range append(candidates, "main", "master") {
		if _, err := explainGit(dir, "rev-parse", "--verify", "--quiet", "refs/heads/"+b); err == nil {
			return b, nil
		}
	}
	b, err := l.DefaultBranch()
	if !errors.Is(err, ledger.ErrNoBranch) {
		return b, err
	}
	// A detached HEAD with no local branch: CI's checkout (actions/checkout leaves a pull request's
	// merge commit detached, with the branches fetched only as origin/*). The remote-tracking
	// default branch is then the one to read.
	for _, b := range append(candidates, "main", "master") {
		if _, err := explainGit(dir, "rev-parse", "--verify", "--quiet", "refs/remotes/origin/"+b); err == nil {
			return "origin/" + b, nil
		}
	}
	return "", fmt.Errorf("HEAD is detached and there is no main, master, origin/main or origin/master to read the policy and the ledger from: "+
		"name the branch with --base (e.g. --base origin/main), or fetch it (actions/checkout with fetch-depth: 0): %w", err)
}

// prBase is the base branch of the pull request a CI job runs for, as GitHub Actions names it in
// GITHUB_BASE_REF (set on pull_request events only): the local branch of that name when there is
// one, else its remote-tracking branch origin/NAME, which is all actions/checkout leaves. "" when
// the variable is unset.
func prBase(dir string) (string, error) {
	b := strings.TrimSpace(os.Getenv("GITHUB_BASE_REF"))
	if b == "" {
		return "", nil
	}
	if err := requireRepository(dir); err != nil {
		return "", err
	}
	for _, ref := range []string{"refs/heads/" + b, "refs/remotes/origin/" + b} {
		if _, err := explainGit(dir, "rev-parse", "--verify", "--quiet", ref+"^{commit}"); err == nil {
			return strings.TrimPrefix(strings.TrimPrefix(ref, "refs/heads/"), "refs/remotes/"), nil
		}
	}
	return "", fmt.Errorf("GITHUB_BASE_REF names the base branch %q, but neither %s nor origin/%s exists in %s: "+
		"fetch the history (actions/checkout with fetch-depth: 0) or name the base with --base", b, b, b, dir)
}

// reviewBase is the branch a review's policy and ledger come from: --base, else the pull request's
// base in a GitHub Actions job (GITHUB_BASE_REF), else the branch origin/HEAD names (as origin/NAME), else a local main or master. It never falls back to the
// branch checked out: in a clone of a pull request's branch that is the branch being judged, which
// must not be judged under its own policy and history.
func reviewBase(dir, base string) (string, error) {
	c, err := chooseBase(dir, base)
	return c.Ref, err
}

// baseChoice is the base a review judges against and why that one: the policy and the ledger are
// read from it, so the output names it (a fork's origin/HEAD is the fork's own branch, which may
// carry the contributor's own policy).
type baseChoice struct {
	Ref string // as given or found: "origin/main", "main"
	How string // why it was taken: "--base", "origin/HEAD names it", ...
}

// chooseBase is reviewBase with the reason for the choice.
func chooseBase(dir, base string) (baseChoice, error) {
	if err := requireRepository(dir); err != nil {
		return baseChoice{}, err
	}
	if base != "" {
		return baseChoice{base, "--base"}, nil
	}
	if b, err := prBase(dir); b != "" || err != nil {
		return baseChoice{b, "GITHUB_BASE_REF names it: the pull request's base in a GitHub Actions job"}, err
	}
	if out, err := explainGit(dir, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD"); err == nil {
		return baseChoice{strings.TrimSpace(string(out)), "origin/HEAD names it; in a fork's clone that is the fork's branch: --base names another"}, nil
	}
	for _, b := range []string{"main", "master"} {
		if _, err := explainGit(dir, "rev-parse", "--verify", "--quiet", "refs/heads/"+b); err == nil {
			return baseChoice{b, "no origin/HEAD here, so the local " + b + "; --base names another"}, nil
		}
	}
	return baseChoice{}, errors.New("no base branch to judge against: origin/HEAD, main and master do not exist here; " +
		"name the branch the changes merge into with --base (e.g. --base origin/main)")
}

func explainGit(dir string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	c := exec.Command("git", append([]string{"-C", dir}, args...)...)
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("git %s: %s", strings.Join(args, " "), msg)
		}
		return nil, fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}
