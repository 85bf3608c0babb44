package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/reconcile/depgraph"
	"github.com/parleyhq/parley/reconcile/gitops"
	"github.com/parleyhq/parley/trailers/ledger"
)

// maxFileBytes bounds the files a snapshot reads: manifests and Terraform files are small, and a
// multi-megabyte YAML file is data, not configuration Parley gates.
const maxFileBytes = 4 << 20

// ReadFiles reads the YAML, Terraform and policy files of a revision (a branch, tag or commit)
// of the repository at dir (bare or not), and the commit it resolved to.
func ReadFiles(dir, rev string) (map[string][]byte, string, error) {
	repo, hash, err := resolve(dir, rev)
	if err != nil {
		return nil, "", err
	}
	files, err := readTree(repo, hash)
	if err != nil {
		return nil, "", fmt.Errorf("%s at %s: %w", dir, rev, err)
	}
	return files, hash.String(), nil
}

func resolve(dir, rev string) (*git.Repository, plumbing.Hash, error) {
	// A bare clone (the server's) opens as it is; a work tree may be named by a subdirectory.
	repo, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		repo, err = git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true})
	}
	if err != nil {
		return nil, plumbing.ZeroHash, fmt.Errorf("open %s: %w", dir, err)
	}
	hash, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, plumbing.ZeroHash, fmt.Errorf("%s: resolve %s: %w", dir, rev, err)
	}
	return repo, *hash, nil
}

// ReadTree reads the files of a commit that Parley judges: manifests, Terraform, the policy, what
// Helm and Kustomize need to render, and the files kustomization generators read. It is the tree a
// snapshot holds, for readers that judge a commit of their own (a pull request's head).
func ReadTree(repo *git.Repository, hash plumbing.Hash) (map[string][]byte, error) {
	return readTree(repo, hash)
}

func readTree(repo *git.Repository, hash plumbing.Hash) (map[string][]byte, error) {
	c, err := repo.CommitObject(hash)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", hash, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", hash, err)
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
		return nil, err
	}
	// The files kustomization generators read (a script in a ConfigMap, an .env file): without
	// them the kustomization does not build.
	var kustomizations []string
	for name := range files {
		if gitops.IsKustomizationFile(name) {
			kustomizations = append(kustomizations, name)
		}
	}
	for _, name := range kustomizations {
		for _, p := range gitops.GeneratorInputs(name, files[name]) {
			if _, ok := files[p]; ok {
				continue
			}
			f, err := tree.File(p)
			if err != nil || f.Size > maxFileBytes || !f.Mode.IsFile() {
				continue // kustomize reports what is missing when it builds
			}
			content, err := f.Contents()
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", p, err)
			}
			files[p] = []byte(content)
		}
	}
	return files, nil
}

// wanted: manifests, Terraform, the policy, and what Helm needs to render a chart in the
// repository (template helpers, the values schema, .helmignore).
func wanted(name string) bool {
	n := strings.ToLower(name)
	return strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") || strings.HasSuffix(n, ".tf") ||
		strings.HasSuffix(n, ".hcl") || strings.HasSuffix(n, "/kustomization") || n == "kustomization" ||
		strings.HasSuffix(n, ".tpl") || strings.HasSuffix(n, "/values.schema.json") || strings.HasSuffix(n, "/.helmignore")
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
	return (*SnapshotCache)(nil).Load(ctx, dir, branch, policyPath, led, pol)
}

// SnapshotCache keeps the last snapshot's files, policy and discovered managers, and hands them
// out again while the branch has not moved: a machine-speed actor's events then cost a ref lookup
// and a ledger check instead of reading and parsing the whole branch each time. The zero value is
// ready; a nil *SnapshotCache caches nothing. Safe for concurrent use.
type SnapshotCache struct {
	mu     sync.Mutex
	key    string // dir, branch, policy path and commit of the cached snapshot
	files  map[string][]byte
	policy *policy.Policy
	derive *derived
}

// Load is LoadSnapshot through the cache. A policy given here is used as it is (and not cached).
func (c *SnapshotCache) Load(ctx context.Context, dir, branch, policyPath string, led Ledger, pol *policy.Policy) (Snapshot, error) {
	repo, hash, err := resolve(dir, branch)
	if err != nil {
		return Snapshot{}, err
	}
	if _, err := led.Update(ctx, branch); err != nil {
		return Snapshot{}, fmt.Errorf("update the ledger of %s: %w", branch, err)
	}
	var headTime time.Time
	if c, err := repo.CommitObject(hash); err == nil {
		headTime = c.Committer.When.UTC()
	}
	origin := ""
	if r, err := repo.Remote("origin"); err == nil && len(r.Config().URLs) > 0 {
		origin = r.Config().URLs[0]
	}
	key := dir + "\x00" + branch + "\x00" + policyPath + "\x00" + hash.String()
	if c != nil {
		c.mu.Lock()
		hit := c.key == key
		files, cached, d := c.files, c.policy, c.derive
		c.mu.Unlock()
		if hit {
			if pol == nil {
				pol = cached
			}
			return Snapshot{Files: files, Git: led, Policy: pol, Head: hash.String(), HeadTime: headTime, Origin: origin, derive: d}, nil
		}
	}
	files, err := readTree(repo, hash)
	if err != nil {
		return Snapshot{}, fmt.Errorf("%s at %s: %w", dir, branch, err)
	}
	fromBranch := pol == nil
	if fromBranch {
		if pol, err = LoadPolicy(files, policyPath); err != nil {
			return Snapshot{}, fmt.Errorf("%s at %s: %w", dir, branch, err)
		}
	}
	snap := Snapshot{Files: files, Git: led, Policy: pol, Head: hash.String(), HeadTime: headTime, Origin: origin, derive: &derived{}}
	if c != nil && fromBranch {
		c.mu.Lock()
		c.key, c.files, c.policy, c.derive = key, files, pol, snap.derive
		c.mu.Unlock()
	}
	return snap, nil
}

// derived holds what is computed from a snapshot's files once and shared by every batch judged
// against the same commit. Snapshot.Files must not be modified once derived is set.
type derived struct {
	once sync.Once
	inv  *gitops.Inventory

	graphOnce  sync.Once
	graph      *depgraph.Graph
	mu         sync.Mutex
	dependents map[core.Field][]core.Dependent // by field, as computed
	gitFields  map[string][]core.Field         // GitFields by pattern, as asked
}

// dependents returns the fields that depend on f in the snapshot's repository (its dependency
// graph, built once per commit; each field's answer kept).
func (s Snapshot) dependents(f core.Field) []core.Dependent {
	d := s.derive
	if d == nil {
		d = &derived{}
	}
	d.graphOnce.Do(func() { d.graph, _ = depgraph.Build(s.Files) }) // files it cannot read have no dependents
	d.mu.Lock()
	deps, ok := d.dependents[f]
	d.mu.Unlock()
	if ok {
		return deps
	}
	for _, dep := range d.graph.Dependents(f) {
		deps = append(deps, core.Dependent{Field: dep.Field, Via: dep.Via})
	}
	d.mu.Lock()
	if d.dependents == nil {
		d.dependents = map[core.Field][]core.Dependent{}
	}
	d.dependents[f] = deps
	d.mu.Unlock()
	return deps
}

// inventory discovers the snapshot's Argo CD and Flux managers, once per commit.
// gitClaim is the claim Git holds on f: the ledger's, or for a field no manifest spells but a chart
// in the repository renders for a release, the rendered value as Git's (baseline) claim, with the
// snapshot's commit as evidence. The ledger reads files as written, so it cannot see such a field.
func (s Snapshot) gitClaim(f core.Field) (core.Claim, bool, error) {
	c, ok, err := s.Git.Current(f)
	if err != nil || ok {
		return c, ok, err
	}
	inv := s.inventory()
	if inv == nil {
		return core.Claim{}, false, nil
	}
	v, ok := inv.RenderedValue(f)
	if !ok {
		return core.Claim{}, false, nil
	}
	pl, _ := inv.Locate(f)
	return core.Claim{Field: f, Value: v, Intent: core.IntentBaseline, At: s.HeadTime,
		Actor:    core.Actor{Identity: core.Identity{Source: core.SourceGitAuthor, Name: "rendered from " + pl.Manifest}},
		Evidence: core.Evidence{Source: "git", Commit: s.Head}}, true, nil
}

func (s Snapshot) inventory() *gitops.Inventory {
	if s.derive == nil {
		inv, _ := gitops.DiscoverFrom(s.Files, s.Origin) // files it cannot read are skipped; parley discover shows them
		return inv
	}
	s.derive.once.Do(func() { s.derive.inv, _ = gitops.DiscoverFrom(s.Files, s.Origin) })
	return s.derive.inv
}

// GitValue is Git's value of f and whether Git sets it (a value Git removes counts as not set):
// what a restated observation is compared with (events.Claims).
func (s Snapshot) GitValue(f core.Field) (core.Value, bool) {
	c, ok, err := s.gitClaim(f)
	if err != nil || !ok || c.Value.Absent() {
		return core.Value{}, false
	}
	return c.Value, true
}
