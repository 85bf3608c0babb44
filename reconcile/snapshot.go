package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/codeowners"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/policy/arbiter"
	"github.com/parleyhq/parley/reconcile/depgraph"
	"github.com/parleyhq/parley/reconcile/gitops"
	"github.com/parleyhq/parley/trailers/ledger"
)

// ReadFiles reads the YAML, Terraform and policy files of a revision (a branch, tag or commit)
// of the repository at dir (bare or not), and the commit it resolved to. Files above the default
// budget (core.DefaultBudget, 8 MiB) are left out; ReadFilesWithin says which.
func ReadFiles(dir, rev string) (map[string][]byte, string, error) {
	files, hash, _, err := ReadFilesWithin(dir, rev, core.Budget{})
	return files, hash, err
}

// ReadFilesWithin is ReadFiles under budget b: each file above b.FileBytes is left out unread,
// and named in problems ("k8s/prod/big.yaml: 19.9 MB, above the 8 MiB Parley reads; not
// judged").
func ReadFilesWithin(dir, rev string, b core.Budget) (files map[string][]byte, hash string, problems []string, err error) {
	repo, h, err := resolve(dir, rev)
	if err != nil {
		return nil, "", nil, err
	}
	files, problems, err = readTree(repo, h, b.WithDefaults())
	if err != nil {
		return nil, "", nil, fmt.Errorf("%s at %s: %w", dir, rev, err)
	}
	return files, h.String(), problems, nil
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
	files, _, err := readTree(repo, hash, core.DefaultBudget())
	return files, err
}

// readTree reads the files Parley judges at hash; a file above b.FileBytes is not read, and is
// named in problems.
func readTree(repo *git.Repository, hash plumbing.Hash, b core.Budget) (map[string][]byte, []string, error) {
	c, err := repo.CommitObject(hash)
	if err != nil {
		return nil, nil, fmt.Errorf("commit %s: %w", hash, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, nil, fmt.Errorf("tree of %s: %w", hash, err)
	}
	files := map[string][]byte{}
	var problems []string
	// A walk of the tree's entries, not tree.Files(): that reads every blob of the tree, the Go
	// sources and images of a repository too, to hand out files this reader then ignores.
	walk := object.NewTreeWalker(tree, true, nil)
	defer walk.Close()
	for {
		name, entry, err := walk.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("tree of %s: %w", hash, err)
		}
		if !entry.Mode.IsFile() || !wanted(name) {
			continue
		}
		blob, err := repo.BlobObject(entry.Hash)
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", name, err)
		}
		if blob.Size > b.FileBytes {
			problems = append(problems, b.FileTooLarge(name, blob.Size))
			continue
		}
		data, err := readBlob(blob)
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", name, err)
		}
		files[name] = data
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
			if err != nil || !f.Mode.IsFile() {
				continue // kustomize reports what is missing when it builds
			}
			if f.Size > b.FileBytes {
				problems = append(problems, b.FileTooLarge(p, f.Size))
				continue
			}
			content, err := f.Contents()
			if err != nil {
				return nil, nil, fmt.Errorf("read %s: %w", p, err)
			}
			files[p] = []byte(content)
		}
	}
	return files, problems, nil
}

func readBlob(blob *object.Blob) ([]byte, error) {
	r, err := blob.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// wanted: manifests, Terraform, the policy, what Helm needs to render a chart in the
// repository (template helpers, the values schema, .helmignore), and CODEOWNERS (who is asked
// when the policy names nobody).
func wanted(name string) bool {
	if slices.Contains(codeowners.Locations, name) {
		return true
	}
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
	// Helm is the Helm renderer the snapshots it loads discover with (Snapshot.Helm).
	Helm gitops.HelmRenderer
	// FileBudget is the largest file the snapshots it loads read (core.Budget.FileBytes); zero:
	// the default, 8 MiB.
	FileBudget int64

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
			return Snapshot{Files: files, Git: led, Policy: pol, Head: hash.String(), HeadTime: headTime, Origin: origin, Helm: c.Helm, derive: d}, nil
		}
	}
	var budget core.Budget
	if c != nil {
		budget.FileBytes = c.FileBudget
	}
	files, _, err := readTree(repo, hash, budget.WithDefaults()) // parley discover names the files left out
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
	if c != nil {
		snap.Helm = c.Helm
	}
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

	ownersOnce sync.Once
	owners     *codeowners.File
	ownersErr  error

	graphOnce  sync.Once
	graph      *depgraph.Graph
	mu         sync.Mutex
	dependents map[core.Field][]core.Dependent // by field, as computed
	gitFields  map[string][]core.Field         // GitFields by pattern, as asked
	current    map[core.Field]gitAnswer        // Git's claim on a field, as asked (at most maxCurrentMemo)
	history    map[core.Field][]core.Claim     // Git's history of a field, as asked (at most maxCurrentMemo)

	// arbiters are *arbiter.Arbiter kept between judgements at this commit: an arbiter keeps
	// what repeats between fields (resolved actors, the blocks matching an object, the outcome of
	// the rules per pair of claim profiles), none of it read from Git, so a new one per review
	// (as before) threw that away and evaluated every rule again. An arbiter serves one policy
	// and one goroutine at a time, hence the pool, and the policy is checked on the way out (a
	// snapshot given its policy shares the commit's derived state with the branch's own).
	arbiters sync.Pool

	// conditions are the values of owner_when conditions (they read only the field and Git, whose
	// answers do not change within a commit), per condition and field: evaluating the demo's
	// contains(git_values(...), field.name) in HCL was a third of a judgement's arbitration. The
	// condition's pointer names its policy's parse, so another policy's condition is its own entry.
	conditions map[conditionKey]bool // at most maxCurrentMemo
}

type conditionKey struct {
	e *policy.Expr
	f core.Field
}

// Condition is the kept value of e for f (arbiter.ConditionMemo).
func (d *derived) Condition(e *policy.Expr, f core.Field) (v, ok bool) {
	d.mu.Lock()
	v, ok = d.conditions[conditionKey{e, f}]
	d.mu.Unlock()
	return v, ok
}

// KeepCondition keeps the value of e for f (arbiter.ConditionMemo).
func (d *derived) KeepCondition(e *policy.Expr, f core.Field, v bool) {
	d.mu.Lock()
	if d.conditions == nil {
		d.conditions = map[conditionKey]bool{}
	}
	if len(d.conditions) < maxCurrentMemo {
		d.conditions[conditionKey{e, f}] = v
	}
	d.mu.Unlock()
}

// decide is arbiter.Decide(p, in) on an arbiter kept for this commit.
func (d *derived) decide(p *policy.Policy, in arbiter.Input) core.Verdict {
	if d == nil {
		return arbiter.Decide(p, in)
	}
	a, _ := d.arbiters.Get().(*arbiter.Arbiter)
	if a == nil || a.Policy() != p {
		a = arbiter.New(p)
	}
	v := a.Decide(in)
	d.arbiters.Put(a)
	return v
}

// gitHistory is g.History(f), kept per commit like gitCurrent (the oscillation check asks it on
// every judgement). The slice may be the one kept: the caller only reads it (judgeOn copies it
// into the judgement's history), so a hit costs no copy.
func (d *derived) gitHistory(g GitState, f core.Field) ([]core.Claim, error) {
	if d == nil {
		return g.History(f)
	}
	d.mu.Lock()
	h, hit := d.history[f]
	d.mu.Unlock()
	if hit {
		return h, nil
	}
	h, err := g.History(f)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if d.history == nil {
		d.history = map[core.Field][]core.Claim{}
	}
	if len(d.history) < maxCurrentMemo {
		d.history[f] = slices.Clone(h)
	}
	d.mu.Unlock()
	return h, nil
}

// gitAnswer is one field's Git claim as the ledger answered it for the commit.
type gitAnswer struct {
	claim core.Claim
	ok    bool
}

// maxCurrentMemo bounds the fields whose Git claim a commit's memo keeps (about 100 MB at most):
// past it a field is asked of the ledger each time, as before the memo.
const maxCurrentMemo = 1 << 16

// gitCurrent is g.Current(f), kept per commit: at admission rates each review asks the ledger for
// the same fields' claims (the field itself, and git_value() in an owner_when) and the ledger's
// answer for a commit does not change. Errors are not kept. d may be nil (nothing kept).
func (d *derived) gitCurrent(g GitState, f core.Field) (core.Claim, bool, error) {
	if d == nil {
		return g.Current(f)
	}
	d.mu.Lock()
	a, hit := d.current[f]
	d.mu.Unlock()
	if hit {
		return a.claim, a.ok, nil
	}
	c, ok, err := g.Current(f)
	if err != nil {
		return c, ok, err
	}
	d.mu.Lock()
	if d.current == nil {
		d.current = map[core.Field]gitAnswer{}
	}
	if len(d.current) < maxCurrentMemo {
		d.current[f] = gitAnswer{claim: c, ok: ok}
	}
	d.mu.Unlock()
	return c, ok, nil
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
	c, ok, err := s.derive.gitCurrent(s.Git, f)
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

// owners answers who is asked about f when the policy names nobody: the code owners of the file
// that defines it (its manifest, or the .tf file declaring its resource), by the snapshot's
// CODEOWNERS, parsed once per commit.
func (s Snapshot) owners(f core.Field) arbiter.Owners {
	d := s.derive
	if d == nil {
		d = &derived{}
	}
	d.ownersOnce.Do(func() { d.owners, d.ownersErr = codeowners.Find(s.Files) })
	ask, from := codeowners.Ask(d.owners, d.ownersErr, s.definingFile(f))
	return arbiter.Owners{Ask: ask, From: from}
}

// definingFile is the repository file that defines f: the manifest of its object, or the .tf
// file of its module that declares its resource; "" when none is known.
func (s Snapshot) definingFile(f core.Field) string {
	if f.Scheme == core.SchemeTerraform {
		file, _ := terraformFileIn(s.Files, f)
		return file
	}
	if inv := s.inventory(); inv != nil {
		if pl, ok := inv.Locate(f.Object()); ok {
			return pl.Manifest
		}
	}
	return ""
}

func (s Snapshot) inventory() *gitops.Inventory {
	// Files it cannot read and charts it cannot render (over the renderer's budget) are skipped;
	// parley discover shows them. The renderer's own time budget bounds the rendering.
	discover := func() *gitops.Inventory {
		inv, _ := gitops.DiscoverWith(context.Background(), s.Files, gitops.Options{Origin: s.Origin, Helm: s.Helm})
		return inv
	}
	if s.derive == nil {
		return discover()
	}
	s.derive.once.Do(func() { s.derive.inv = discover() })
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
