// Package repocache keeps a bare clone of each repository Parley judges, fetched with go-git before
// each evaluation. The ledger and pull request reviews then read history, trees and files locally,
// so judging a pull request costs a fetch, not dozens of REST calls.
package repocache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// Cache holds bare clones under Dir, one per repository, and serialises work on each.
type Cache struct {
	Dir string

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)

// validRepo accepts owner/repo names and refuses . and .. parts, which would leave Dir.
func validRepo(name string) bool {
	if !validName.MatchString(name) {
		return false
	}
	for _, p := range strings.Split(name, "/") {
		if p == "." || p == ".." {
			return false
		}
	}
	return true
}

// lock returns the mutex of one repository.
func (c *Cache) lock(name string) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.locks == nil {
		c.locks = map[string]*sync.Mutex{}
	}
	if c.locks[name] == nil {
		c.locks[name] = &sync.Mutex{}
	}
	return c.locks[name]
}

// Sync clones (first time) or fetches the repository fullName ("owner/repo") from url, with the
// branches and any extra refspecs (such as "+refs/pull/7/head:refs/parley/pull/7"), and returns
// the clone's directory. token, if not empty, authenticates as an installation. Callers holding
// the returned unlock function have the clone to themselves until they call it.
func (c *Cache) Sync(ctx context.Context, fullName, url, token string, extra ...string) (dir string, unlock func(), err error) {
	return c.SyncBranches(ctx, fullName, url, token, nil, extra...)
}

// SyncBranches is Sync fetching only the named branches (and extra) rather than every branch:
// what judging one pull request reads. go-git's fetch checks and updates each fetched reference
// one by one, which on a repository with hundreds of branches (argo-cd's 781) was most of a
// judgement. No branches means all of them, as Sync.
func (c *Cache) SyncBranches(ctx context.Context, fullName, url, token string, branches []string, extra ...string) (dir string, unlock func(), err error) {
	if !validRepo(fullName) {
		return "", nil, fmt.Errorf("repository name %q is not owner/repo", fullName)
	}
	specs := []config.RefSpec{"+refs/heads/*:refs/heads/*"}
	if len(branches) > 0 {
		specs = specs[:0]
		for _, b := range branches {
			// The names come from webhook payloads and become files of the clone: git's own rules
			// for reference names (no "..", no leading "/", no "*" or ":") keep them inside refs/heads.
			if err := plumbing.NewBranchReferenceName(b).Validate(); err != nil {
				return "", nil, fmt.Errorf("branch name %q: %w", b, err)
			}
			specs = append(specs, config.RefSpec("+refs/heads/"+b+":refs/heads/"+b))
		}
	}
	l := c.lock(fullName)
	l.Lock()
	dir = filepath.Join(c.Dir, filepath.FromSlash(fullName)+".git")
	for _, s := range extra {
		rs := config.RefSpec(s)
		if err := rs.Validate(); err != nil {
			l.Unlock()
			return "", nil, fmt.Errorf("refspec %q: %w", s, err)
		}
		specs = append(specs, rs)
	}
	var auth transport.AuthMethod
	if token != "" {
		auth = &githttp.BasicAuth{Username: "x-access-token", Password: token}
	}
	repo, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			l.Unlock()
			return "", nil, err
		}
		repo, err = git.PlainInit(dir, true)
		if err == nil {
			_, err = repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{url}})
		}
	}
	if err != nil {
		l.Unlock()
		return "", nil, fmt.Errorf("open clone of %s: %w", fullName, err)
	}
	err = repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", RemoteURL: url, RefSpecs: specs, Auth: auth, Force: true, Tags: git.NoTags})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		l.Unlock()
		return "", nil, fmt.Errorf("fetch %s: %w", fullName, err)
	}
	if err := repackIfScattered(repo, dir); err != nil {
		l.Unlock()
		return "", nil, fmt.Errorf("repack %s: %w", fullName, err)
	}
	return dir, l.Unlock, nil
}

// Open returns the clone of fullName as it is, without fetching, when there is one: for a caller
// that fetched it a moment ago (Sync) and accepts what it holds. The caller has the clone to itself
// until it calls unlock. ok is false when there is no clone yet.
func (c *Cache) Open(fullName string) (dir string, unlock func(), ok bool) {
	if !validRepo(fullName) {
		return "", nil, false
	}
	l := c.lock(fullName)
	l.Lock()
	dir = filepath.Join(c.Dir, filepath.FromSlash(fullName)+".git")
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil {
		l.Unlock()
		return "", nil, false
	}
	return dir, l.Unlock, true
}

// MaxPacks is how many pack files a clone may collect before Sync repacks it into one. Every
// fetch adds a pack, and go-git reads every pack's index whenever the repository is opened, so a
// clone that a drift loop fetches after each of its own pushes would slow down a little with every
// event; git itself repacks for the same reason (gc.autoPackLimit, 50).
const MaxPacks = 32

func repackIfScattered(repo *git.Repository, dir string) error {
	packs, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
	if err != nil || len(packs) <= MaxPacks {
		return err
	}
	return repo.RepackObjects(&git.RepackConfig{})
}

// Forget deletes the clone (and the ledger inside it) of fullName; forgetting an unknown
// repository is not an error.
func (c *Cache) Forget(fullName string) error {
	if !validRepo(fullName) {
		return fmt.Errorf("repository name %q is not owner/repo", fullName)
	}
	l := c.lock(fullName)
	l.Lock()
	defer l.Unlock()
	if err := os.RemoveAll(filepath.Join(c.Dir, filepath.FromSlash(fullName)+".git")); err != nil {
		return fmt.Errorf("forget %s: %w", fullName, err)
	}
	return nil
}
