package review

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/depgraph"
	"github.com/parleyhq/parley/trailers/ledger"
)

// GitSource reads a pull request from a local repository as GitHub shows it: the commits
// reachable from head and not from base, and the files that differ between the merge base of base
// and head and the head ("Files changed"). It is what `parley review` uses offline, and what tests
// use in place of GitHub.
type GitSource struct {
	repo                  *git.Repository
	base, head, mergeBase *object.Commit
	openPGPKeys           string // what OpenPGP commit signatures are verified against

	graphOnce sync.Once
	graph     *depgraph.Graph
	graphErr  error
	// parsed, if set (Evaluate sets PullRequest.Parsed's), remembers the head tree's graph.
	parsed *Parsed

	// The commits and files are read once: parley review lists the commits for the contributors
	// and Evaluate again for their trailers, the App lists the files for Evaluate and for the
	// policy gate.
	commitsOnce sync.Once
	commits     []Commit
	commitsErr  error
	filesOnce   sync.Once
	files       []FileChange
	filesErr    error

	// commitsRead counts the commit objects the merge base and the commit list read: the history
	// above the merge base, not the repository's (TestReviewReadsOnlyAboveTheMergeBase).
	commitsRead int
	// treeReads counts the reads of the head's whole tree for the dependency graph.
	treeReads int
}

// ErrNoMergeBase is returned by OpenGitSource when base and head share no commit in the
// repository: in a shallow clone, the history that joins them was not fetched.
var ErrNoMergeBase = errors.New("no merge base")

// OpenGitSource opens the repository at dir and resolves base and head (any revision go-git reads).
func OpenGitSource(dir, base, head string) (*GitSource, error) {
	repo, err := git.PlainOpen(dir) // a bare clone, or a work tree's root
	if err != nil {
		repo, err = git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true})
	}
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", dir, err)
	}
	return openGitSource(repo, base, head)
}

// openGitSource resolves base and head in repo and finds their merge base.
func openGitSource(repo *git.Repository, base, head string) (*GitSource, error) {
	var err error
	s := &GitSource{repo: repo}
	if s.base, err = resolve(repo, base); err != nil {
		return nil, err
	}
	if s.head, err = resolve(repo, head); err != nil {
		return nil, err
	}
	if s.mergeBase, err = s.findMergeBase(); err != nil {
		return nil, fmt.Errorf("%s (%s) and %s (%s): %w", base, short(s.base.Hash.String()), head, short(s.head.Hash.String()), err)
	}
	return s, nil
}

// mergeBase returns the best common ancestor of a and b. Of several (criss-cross merges), the most
// recently committed is taken, then the lowest hash: the choice is stable.
func (s *GitSource) findMergeBase() (*object.Commit, error) {
	repo := s.repo
	bases, read, err := mergeBases(repo, s.base, s.head)
	s.commitsRead += read
	if err != nil {
		return nil, fmt.Errorf("find their merge base: %w", err)
	}
	if len(bases) == 0 {
		if shallow, _ := repo.Storer.Shallow(); len(shallow) > 0 {
			return nil, fmt.Errorf("%w in this shallow clone: fetch more history (git fetch --deepen=100, or --unshallow; fetch-depth: 0 in actions/checkout)", ErrNoMergeBase)
		}
		return nil, fmt.Errorf("%w: they share no history", ErrNoMergeBase)
	}
	best := bases[0]
	for _, c := range bases[1:] {
		if c.Committer.When.After(best.Committer.When) || c.Committer.When.Equal(best.Committer.When) && c.Hash.String() < best.Hash.String() {
			best = c
		}
	}
	return best, nil
}

func resolve(repo *git.Repository, rev string) (*object.Commit, error) {
	h, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, fmt.Errorf("resolve %q: %w", rev, err)
	}
	c, err := repo.CommitObject(*h)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", h, err)
	}
	return c, nil
}

// BaseSHA and HeadSHA are the resolved commits.
func (s *GitSource) BaseSHA() string { return s.base.Hash.String() }

// MergeBaseSHA is the merge base of base and head: what the pull request's files are compared with.
func (s *GitSource) MergeBaseSHA() string { return s.mergeBase.Hash.String() }

// HeadSHA is the resolved head commit.
func (s *GitSource) HeadSHA() string { return s.head.Hash.String() }

// SetOpenPGPKeys gives the armored OpenPGP keys commits' OpenPGP signatures are verified against:
// the base policy's (policy.Policy.OpenPGPKeyring). SSH signatures need none.
// Commits listed before are listed again with the new keys' proofs.
func (s *GitSource) SetOpenPGPKeys(armored string) {
	s.openPGPKeys = armored
	s.commitsOnce, s.commits, s.commitsErr = sync.Once{}, nil, nil
}

// HeadCommit returns the head commit's author and time, for PullRequest.Author and Updated. The
// author carries what the commit's signature proves (ledger.VerifyCommit): an email alone proves
// nothing.
func (s *GitSource) HeadCommit() (core.Identity, Commit) {
	c := s.head
	id := s.author(c)
	return id, Commit{SHA: c.Hash.String(), Message: c.Message, Author: id, Time: c.Author.When}
}

func (s *GitSource) author(c *object.Commit) core.Identity {
	return core.Identity{Source: core.SourceGitAuthor, ID: c.Author.Email, Name: c.Author.Name,
		Proof: ledger.VerifyCommit(c, s.openPGPKeys)}
}

// Commits lists the commits reachable from head but not from base, oldest first.
func (s *GitSource) Commits(ctx context.Context) ([]Commit, error) {
	s.commitsOnce.Do(func() {
		cs, read, err := headOnly(s.repo, s.base, s.head)
		s.commitsRead += read
		if err != nil {
			s.commitsErr = fmt.Errorf("commits of %s not in %s: %w", s.head.Hash, s.base.Hash, err)
			return
		}
		s.commits = make([]Commit, 0, len(cs))
		for _, c := range cs {
			s.commits = append(s.commits, Commit{SHA: c.Hash.String(), Message: c.Message, Author: s.author(c), Time: c.Author.When})
		}
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.commits, s.commitsErr
}

// Files lists the files that differ between the merge base and head.
func (s *GitSource) Files(ctx context.Context) ([]FileChange, error) {
	s.filesOnce.Do(func() { s.files, s.filesErr = s.diffFiles(ctx) })
	return s.files, s.filesErr
}

func (s *GitSource) diffFiles(ctx context.Context) ([]FileChange, error) {
	bt, err := s.mergeBase.Tree()
	if err != nil {
		return nil, err
	}
	ht, err := s.head.Tree()
	if err != nil {
		return nil, err
	}
	changes, err := object.DiffTreeWithOptions(ctx, bt, ht, &object.DiffTreeOptions{DetectRenames: true})
	if err != nil {
		return nil, fmt.Errorf("diff %s..%s: %w", s.mergeBase.Hash, s.head.Hash, err)
	}
	var out []FileChange
	for _, c := range changes {
		switch {
		case c.From.Name == "":
			out = append(out, FileChange{Path: c.To.Name, Status: "added"})
		case c.To.Name == "":
			out = append(out, FileChange{Path: c.From.Name, Status: "removed"})
		case c.From.Name != c.To.Name:
			out = append(out, FileChange{Path: c.To.Name, PreviousPath: c.From.Name, Status: "renamed"})
		default:
			out = append(out, FileChange{Path: c.To.Name, Status: "modified"})
		}
	}
	return out, nil
}

// Size is a file's size at a commit, read from its blob's header without reading the blob; ok is
// false when the file does not exist there.
func (s *GitSource) Size(ctx context.Context, sha, path string) (int64, bool, error) {
	c, err := s.repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return 0, false, fmt.Errorf("read commit %s: %w", sha, err)
	}
	f, err := c.File(path)
	if errors.Is(err, object.ErrFileNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read %s at %s: %w", path, sha, err)
	}
	return f.Size, true, nil
}

// Content reads a file at a commit.
func (s *GitSource) Content(ctx context.Context, sha, path string) ([]byte, bool, error) {
	c, err := s.repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return nil, false, fmt.Errorf("read commit %s: %w", sha, err)
	}
	f, err := c.File(path)
	if errors.Is(err, object.ErrFileNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s at %s: %w", path, sha, err)
	}
	text, err := f.Contents()
	if err != nil {
		return nil, false, fmt.Errorf("read %s at %s: %w", path, sha, err)
	}
	return []byte(text), true, nil
}

// Dependents lists the objects that read f in the head's tree: the pull request is judged with the
// dependencies it would merge (a Deployment it adds that reads the changed value counts). The
// graph is built once per source (reconcile/depgraph); files it cannot read have no dependents.
func (s *GitSource) Dependents(f core.Field) ([]core.Dependent, error) {
	if !depgraph.MayHaveDependents(f) {
		// Nothing reads such a field (an image tag, a chart version): no need to read and parse
		// every manifest of the head, most of a review of a large repository's bump.
		return nil, nil
	}
	s.graphOnce.Do(func() {
		tree := s.head.TreeHash.String()
		if e, ok := s.parsed.get(graphPath, tree); ok {
			s.graph = e.graph
			return
		}
		s.treeReads++
		files, err := reconcile.ReadTree(s.repo, s.head.Hash)
		if err != nil {
			s.graphErr = fmt.Errorf("read the tree of %s: %w", s.head.Hash, err)
			return // a failed read is not remembered: the next judgement reads again
		}
		s.graph, _ = depgraph.Build(files)
		n := 0
		for p, data := range files {
			n += len(p) + len(data)
		}
		s.parsed.putGraph(tree, s.graph, n)
	})
	if s.graphErr != nil {
		return nil, s.graphErr
	}
	var out []core.Dependent
	for _, d := range s.graph.Dependents(f) {
		out = append(out, core.Dependent{Field: d.Field, Via: d.Via})
	}
	return out, nil
}

// useParsed makes the source remember its head tree's dependency graph in m (Evaluate calls it
// with PullRequest.Parsed).
func (s *GitSource) useParsed(m *Parsed) { s.parsed = m }

// Vouch is asked about a commit whose signature proves nothing: it returns who else proves its
// author (the App asks GitHub whether it verified the commit) and how, or a zero identity when
// nobody does (how, if set, then says why the explanation should know, e.g. it was not asked).
type Vouch func(ctx context.Context, c Commit) (who core.Identity, how string, err error)

// CommitAuthors returns the author of each of the branch's commits but skip (the commit already
// judged as PullRequest.Author; "" for none) as a contributor of the files that commit changed:
// the pull request's claim on a field is judged as the author of every commit that touched the
// field's file, as far as the commit's signature (or vouch, when not nil) proves them. Offline
// review and the App share it.
func (s *GitSource) CommitAuthors(ctx context.Context, skip string, vouch Vouch) ([]Contributor, error) {
	commits, err := s.Commits(ctx)
	if err != nil {
		return nil, err
	}
	var out []Contributor
	for _, c := range commits {
		if c.SHA == skip {
			continue
		}
		files, err := s.commitFiles(ctx, c.SHA)
		if err != nil {
			return nil, err
		}
		who, what := c.Author, "authored commit "+short(c.SHA)
		if !who.Proof.Proven() && vouch != nil {
			alt, how, err := vouch(ctx, c)
			if err != nil {
				return nil, fmt.Errorf("commit %s: %w", short(c.SHA), err)
			}
			if alt.ID != "" {
				who = alt
			}
			if how != "" {
				what += "; " + how
			}
		}
		out = append(out, Contributor{Identity: who, What: what, Files: files})
	}
	return out, nil
}

// commitFiles lists the files a commit changed against its first parent (every file, for a root
// commit), under their old and new names.
func (s *GitSource) commitFiles(ctx context.Context, sha string) ([]string, error) {
	c, err := s.repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", short(sha), err)
	}
	to, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of commit %s: %w", short(sha), err)
	}
	var from *object.Tree
	if c.NumParents() > 0 {
		p, err := c.Parent(0)
		if err != nil {
			return nil, fmt.Errorf("parent of commit %s: %w", short(sha), err)
		}
		if from, err = p.Tree(); err != nil {
			return nil, fmt.Errorf("tree of commit %s: %w", short(p.Hash.String()), err)
		}
	}
	changes, err := object.DiffTreeWithOptions(ctx, from, to, nil)
	if err != nil {
		return nil, fmt.Errorf("diff commit %s: %w", short(sha), err)
	}
	files := []string{}
	for _, ch := range changes {
		for _, name := range []string{ch.From.Name, ch.To.Name} {
			if name != "" && (len(files) == 0 || files[len(files)-1] != name) {
				files = append(files, name)
			}
		}
	}
	return files, nil
}

// BlobID is the object ID of the file at a commit, from the tree entry that names it: the blob
// itself is not read. ok is false when there is no such entry, or it is not a file.
func (s *GitSource) BlobID(ctx context.Context, sha, path string) (string, bool, error) {
	c, err := s.repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return "", false, fmt.Errorf("read commit %s: %w", sha, err)
	}
	t, err := c.Tree()
	if err != nil {
		return "", false, fmt.Errorf("tree of %s: %w", sha, err)
	}
	e, err := t.FindEntry(path)
	if err != nil || !e.Mode.IsFile() {
		return "", false, nil // read as before: Size and Content say whether it is there
	}
	return e.Hash.String(), true, nil
}
