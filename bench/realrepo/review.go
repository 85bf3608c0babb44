//go:build unix

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/parleyhq/parley/internal/demo"
)

// reviewFlags are -review mode's: one Renovate-style bump judged on an indexed repository.
type reviewFlags struct {
	file, old, new string // the file the bump changes, and the text it replaces
	parley         string // a parley binary to measure beside this tree's (an older build)
	runs           int
}

// review times one pull request judged once the ledger is indexed (issue 27): the demo policy is
// committed on a branch main at the repository's branch, the ledger indexed by `parley ledger`,
// and a branch renovate/bump made that replaces old by new in file, with a Renovate-like message.
// It then times `parley review --head renovate/bump --base main` (wall, CPU, peak RSS of the
// process) and BenchmarkPullRequestOnRealRepository, the same pull request through the App's
// pull_request handler. Commits are made with git's plumbing in a bare clone, so snapshots
// without their largest blobs serve too.
func review(ctx context.Context, repo, branch string, rf reviewFlags) error {
	tmp, err := os.MkdirTemp("", "parley-realrepo-review-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "parley")
	appTest := filepath.Join(tmp, "app.test")
	for _, b := range [][]string{{"build", "-o", bin, "./cmd/parley"}, {"test", "-c", "-o", appTest, "./app"}} {
		build := exec.CommandContext(ctx, "go", b...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go %s: %w", strings.Join(b, " "), err)
		}
	}
	clone := filepath.Join(tmp, "repo.git")
	if _, err := git(ctx, tmp, "clone", "--quiet", "--bare", "--local", repo, clone); err != nil {
		return err
	}
	if branch == "" {
		if branch, err = git(ctx, clone, "symbolic-ref", "--short", "HEAD"); err != nil {
			return err
		}
	}
	if _, err := git(ctx, clone, "branch", "--force", "main", branch); err != nil && branch != "main" {
		return err
	}
	if _, err := git(ctx, clone, "symbolic-ref", "HEAD", "refs/heads/main"); err != nil {
		return err
	}
	policy := filepath.Join(tmp, "policy.hcl")
	if err := os.WriteFile(policy, []byte(demo.Policy()), 0o644); err != nil {
		return err
	}
	if err := commitFile(ctx, clone, tmp, "main", "main", ".parley/policy.hcl", policy, "parley: add the policy"); err != nil {
		return err
	}
	fmt.Printf("repository %s, branch %s as main, demo policy committed\n", repo, branch)
	fmt.Printf("machine: %d CPUs, %s\n\n", runtime.NumCPU(), runtime.Version())
	idx, err := measure(ctx, clone, bin, "ledger", "--branch", "main")
	if err != nil {
		return err
	}
	fmt.Printf("index (parley ledger, once)       %s\n", idx)

	text, err := git(ctx, clone, "cat-file", "blob", "main:"+rf.file)
	if err != nil {
		return err
	}
	if strings.Count(text, rf.old) != 1 {
		return fmt.Errorf("-old %q occurs %d times in %s: want once", rf.old, strings.Count(text, rf.old), rf.file)
	}
	bumped := filepath.Join(tmp, "bumped")
	if err := os.WriteFile(bumped, []byte(strings.Replace(text, rf.old, rf.new, 1)+"\n"), 0o644); err != nil {
		return err
	}
	msg := fmt.Sprintf("fix(container): update %s (%s ➔ %s)\n\nCo-authored-by: renovate[bot] <29139614+renovate[bot]@users.noreply.github.com>", rf.file, rf.old, rf.new)
	if err := commitFile(ctx, clone, tmp, "main", "renovate/bump", rf.file, bumped, msg); err != nil {
		return err
	}
	bins := []string{bin}
	if rf.parley != "" {
		bins = append(bins, rf.parley)
	}
	for i := range rf.runs {
		for _, b := range bins { // interleaved, so that the machine's load falls on both alike
			m, err := measure(ctx, clone, b, "review", "--head", "renovate/bump", "--base", "main")
			if err != nil && b != bin {
				// An older build may fail where this one does not (a snapshot lacking blobs it read).
				fmt.Printf("run %d parley review (%s) failed: %v\n", i+1, b, err)
				continue
			}
			if err != nil {
				return err
			}
			fmt.Printf("run %d parley review (%s) %s\n", i+1, b, m)
		}
	}
	// The App: the same pull request through the pull_request handler, in the test binary.
	cmd := []string{appTest, "-test.run", "^$", "-test.bench", "PullRequestOnRealRepository", "-test.benchtime", fmt.Sprintf("%dx", rf.runs)}
	env := append(os.Environ(), "PARLEY_BENCH_REPO="+clone, "PARLEY_BENCH_HEAD=renovate/bump")
	out, m, err := measureOutput(ctx, filepath.Join(".", "app"), env, cmd...)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "Benchmark") {
			fmt.Printf("App handler: %s\n  (whole benchmark process: %s)\n", strings.Join(strings.Fields(sc.Text()), " "), m)
		}
	}
	return nil
}

// commitFile commits the file at local as path on top of parent and points branch at the commit,
// through a temporary index: a bare clone has no work tree, and the blobs of other files need
// not be present.
func commitFile(ctx context.Context, clone, tmp, parent, branch, path, local, msg string) error {
	blob, err := git(ctx, clone, "hash-object", "-w", local)
	if err != nil {
		return err
	}
	index := filepath.Join(tmp, "index")
	defer os.Remove(index)
	env := "GIT_INDEX_FILE=" + index
	steps := [][]string{{"read-tree", parent}, {"update-index", "--add", "--cacheinfo", "100644," + blob + "," + path}}
	for _, s := range steps {
		if _, err := gitEnv(ctx, clone, env, s...); err != nil {
			return err
		}
	}
	tree, err := gitEnv(ctx, clone, env, "write-tree")
	if err != nil {
		return err
	}
	c, err := gitEnv(ctx, clone, "GIT_AUTHOR_NAME=renovate[bot]", "commit-tree", tree, "-p", parent, "-m", msg)
	if err != nil {
		return err
	}
	_, err = git(ctx, clone, "update-ref", "refs/heads/"+branch, c)
	return err
}

func gitEnv(ctx context.Context, dir, env string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), env, "GIT_AUTHOR_EMAIL=bot@example.com", "GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// measureOutput is measure for a process whose standard output is wanted, run in dir with env.
func measureOutput(ctx context.Context, dir string, env []string, args ...string) (string, measured, error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir, cmd.Env = dir, env
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	t := time.Now()
	err := cmd.Run()
	m := measured{wall: time.Since(t)}
	if cmd.ProcessState != nil {
		m.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			m.maxRSS = ru.Maxrss * 1024
		}
	}
	if err != nil {
		return "", m, fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), m, nil
}
