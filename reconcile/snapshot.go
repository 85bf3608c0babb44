package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/parleyhq/parley/ledger"
	"github.com/parleyhq/parley/policy"
)

// maxFileBytes bounds the files a snapshot reads: manifests and Terraform files are small, and a
// multi-megabyte YAML file is data, not configuration Parley gates.
const maxFileBytes = 4 << 20

// ReadFiles reads the YAML, Terraform and policy files of a revision (a branch, tag or commit)
// of the repository at dir (bare or not), and the commit it resolved to.
func ReadFiles(dir, rev string) (map[string][]byte, string, error) {
	// A bare clone (the server's) opens as it is; a work tree may be named by a subdirectory.
	repo, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		repo, err = git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true})
	}
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", dir, err)
	}
	hash, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, "", fmt.Errorf("%s: resolve %s: %w", dir, rev, err)
	}
	c, err := repo.CommitObject(*hash)
	if err != nil {
		return nil, "", fmt.Errorf("%s: commit %s: %w", dir, hash, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, "", fmt.Errorf("%s: tree of %s: %w", dir, hash, err)
	}
	files := map[string][]byte{}
	err = tree.Files().ForEach(func(f *object.File) error {
		if !wanted(f.Name) || f.Size > maxFileBytes || !f.Mode.IsFile() {
			return nil
		}
		r, err := f.Reader()
		if err != nil {
			return fmt.Errorf("read %s: %w", f.Name, err)
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			return fmt.Errorf("read %s: %w", f.Name, err)
		}
		files[f.Name] = b
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("%s at %s: %w", dir, rev, err)
	}
	return files, hash.String(), nil
}

func wanted(name string) bool {
	n := strings.ToLower(name)
	return strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") || strings.HasSuffix(n, ".tf") ||
		strings.HasSuffix(n, ".hcl") || strings.HasSuffix(n, "/kustomization") || n == "kustomization"
}

// ErrNoPolicy is returned when the snapshot has no policy file: without one nothing is judged.
var ErrNoPolicy = errors.New("no policy file")

// LoadPolicy parses the policy at path among files.
func LoadPolicy(files map[string][]byte, path string) (*policy.Policy, error) {
	src, ok := files[path]
	if !ok {
		return nil, fmt.Errorf("%s: %w", path, ErrNoPolicy)
	}
	return policy.Parse(src, path)
}

// Ledger is the part of the ledger a snapshot needs: bring the branch's index up to date, then
// answer for it.
type Ledger interface {
	GitState
	Update(ctx context.Context, branch string) (ledger.UpdateStats, error)
}

// LoadSnapshot reads branch of the repository at dir: its files, its ledger (updated first) and
// its policy at policyPath. A nil pol reads the policy from the branch; a policy given here (parley
// ingest --policy) is used instead.
func LoadSnapshot(ctx context.Context, dir, branch, policyPath string, led Ledger, pol *policy.Policy) (Snapshot, error) {
	files, head, err := ReadFiles(dir, branch)
	if err != nil {
		return Snapshot{}, err
	}
	if _, err := led.Update(ctx, branch); err != nil {
		return Snapshot{}, fmt.Errorf("update the ledger of %s: %w", branch, err)
	}
	if pol == nil {
		if pol, err = LoadPolicy(files, policyPath); err != nil {
			return Snapshot{}, fmt.Errorf("%s at %s: %w", dir, branch, err)
		}
	}
	return Snapshot{Files: files, Git: led, Policy: pol, Head: head}, nil
}
