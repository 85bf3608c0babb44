// Package gitlog reads a branch's first-parent history through git's own programs: `git rev-list
// --first-parent` walks it, `git cat-file --batch` hands over each commit object as stored, and one
// long-lived `git diff-tree --stdin` compares each commit's tree with its first parent's. The
// ledger's first index of a long history spends several seconds of CPU in go-git's tree reads
// (packfile decoding, delta resolution, hashing) on its serial first stage; git does the same work
// at a fraction of the cost. Only the CLI uses it (cmd/parley wires it into trailers/ledger's
// Options.OpenHistory, which owns the interface): `parley serve` runs where there is no git binary,
// and the layers below cmd run no programs (internal/layering).
package gitlog

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/parleyhq/parley/internal/gitcatfile"
)

// History runs git on one repository. FirstParents may be called any number of times; ReadCommits
// starts the reading processes once, and NextCommit then returns their commits one at a time. It
// is not safe for concurrent use. Close ends what is still running.
type History struct {
	bin    string
	gitDir string

	catFile, diffTree *child
	commits, parents  []plumbing.Hash
	records           diffRecords // diffTree's output
	next              int
}

// Open checks that git is in PATH. No process runs until FirstParents or ReadCommits.
func Open(gitDir string) (*History, error) {
	bin, err := exec.LookPath("git")
	if err != nil {
		return nil, err
	}
	return &History{bin: bin, gitDir: gitDir}, nil
}

// command is git with the repository named on the command line and nothing from the caller's
// environment that could make git read other objects or other parents than go-git does.
func (h *History) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := gitcatfile.Command(ctx, h.bin, h.gitDir, args...)
	// go-git ignores info/grafts: so must git, or its first parents would differ from go-git's.
	// (An empty graft file has git hint that grafts are deprecated: not a word the ledger says.)
	cmd.Env = append(cmd.Env, "GIT_GRAFT_FILE="+os.DevNull, "GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=advice.graftFileDeprecated", "GIT_CONFIG_VALUE_0=false")
	return cmd
}

// FirstParents lists the commits from tip back along first parents, newest first: up to stop (not
// listed, met true), or to the root, or to a shallow clone's boundary commit.
func (h *History) FirstParents(ctx context.Context, tip, stop plumbing.Hash) (commits []plumbing.Hash, met bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := h.command(ctx, "rev-list", "--first-parent", tip.String())
	var stderr tailBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, false, fmt.Errorf("git rev-list %s: %w", tip, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, false, fmt.Errorf("git rev-list %s: %w", tip, err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		c, ok := parseHash(sc.Bytes())
		if !ok {
			cancel()
			_ = cmd.Wait()
			return nil, false, fmt.Errorf("git rev-list %s: unexpected line %q", tip, sc.Text())
		}
		if c == stop && !stop.IsZero() {
			// The rest of the history is indexed already: git may stop.
			cancel()
			_ = cmd.Wait()
			return commits, true, nil
		}
		commits = append(commits, c)
	}
	scanErr := sc.Err()
	if err := cmd.Wait(); err != nil {
		return nil, false, fmt.Errorf("git rev-list %s: %w%s", tip, err, stderr.suffix())
	}
	if scanErr != nil {
		return nil, false, fmt.Errorf("git rev-list %s: %w", tip, scanErr)
	}
	if len(commits) == 0 || commits[0] != tip {
		return nil, false, fmt.Errorf("git rev-list %s: the list does not start at the tip", tip)
	}
	return commits, false, nil
}

// ReadCommits starts reading commits in order: NextCommit returns each one's stored object and its
// changes against parents[i], or against the empty tree when parents[i] is zero. Two goroutines
// feed the processes, so that git works ahead of the reader by no more than a pipe's worth; they
// stop when ctx ends or Close is called.
func (h *History) ReadCommits(ctx context.Context, commits, parents []plumbing.Hash) error {
	if h.catFile != nil {
		return errors.New("gitlog: ReadCommits called twice")
	}
	if len(parents) != len(commits) {
		return fmt.Errorf("gitlog: %d commits with %d parents", len(commits), len(parents))
	}
	h.commits, h.parents, h.next = commits, parents, 0
	var err error
	h.catFile, err = h.start(ctx, func(w *bufio.Writer) error {
		for _, c := range commits {
			if _, err := w.WriteString(c.String() + "\n"); err != nil {
				return err
			}
		}
		return nil
	}, "cat-file", "--batch", "--buffer") // --buffer: git flushes when its buffer fills, not after each commit
	if err != nil {
		return err
	}
	// --always: a header for every commit, the same commit or not, so that each commit's changes
	// end where the next header begins. -z: paths as they are, unquoted. --no-renames: a rename is a
	// deletion and an addition, as the ledger compares trees.
	h.diffTree, err = h.start(ctx, func(w *bufio.Writer) error {
		for i, c := range commits {
			line := c.String()
			if !parents[i].IsZero() {
				// "commit parent" compares the commit with that parent only (a merge's first).
				line += " " + parents[i].String()
			}
			if _, err := w.WriteString(line + "\n"); err != nil {
				return err
			}
		}
		return nil
	}, "diff-tree", "--stdin", "-r", "-z", "--raw", "--no-renames", "--no-abbrev", "--root", "--always")
	if err != nil {
		h.catFile.stop()
		h.catFile = nil
		return err
	}
	h.records = diffRecords{out: h.diffTree.out}
	return nil
}

// NextCommit returns the next commit ReadCommits asked for: its hash, its object as stored, and
// each entry (a file, a symbolic link, a submodule) that differs between its tree and its
// parent's, in git's tree order, through change. A mode is 0 on the side the entry is absent from;
// path is valid only during the call. An error names the commit and what failed: a process that
// dies or answers out of step never shortens the history.
func (h *History) NextCommit(change func(path []byte, oldMode, newMode filemode.FileMode, oldHash, newHash plumbing.Hash)) (plumbing.Hash, []byte, error) {
	if h.catFile == nil || h.next >= len(h.commits) {
		return plumbing.ZeroHash, nil, errors.New("gitlog: NextCommit without a commit left to read")
	}
	want := h.commits[h.next]
	raw, err := h.readCommit(want)
	if err != nil {
		return want, nil, fmt.Errorf("git cat-file: commit %s: %w", want, err)
	}
	if err := h.readChanges(want, change); err != nil {
		return want, nil, fmt.Errorf("git diff-tree: commit %s: %w", want, err)
	}
	h.next++
	return want, raw, nil
}

func (h *History) readCommit(want plumbing.Hash) ([]byte, error) {
	out := h.catFile.out
	header, err := out.ReadSlice('\n')
	if err != nil {
		return nil, h.catFile.failed(err)
	}
	// "<oid> commit <size>"
	fields := strings.Fields(string(header))
	if len(fields) != 3 || fields[0] != want.String() || fields[1] != "commit" {
		return nil, fmt.Errorf("unexpected header %q", bytes.TrimSpace(header))
	}
	size, err := strconv.ParseInt(fields[2], 10, 64)
	if err != nil || size < 0 || size > 64<<20 {
		return nil, fmt.Errorf("unexpected header %q", bytes.TrimSpace(header))
	}
	buf := make([]byte, size+1) // the object and cat-file's closing newline
	if _, err := io.ReadFull(out, buf); err != nil {
		return nil, h.catFile.failed(err)
	}
	if buf[size] != '\n' {
		return nil, errors.New("the object does not end where its header says")
	}
	return buf[:size:size], nil
}

// readChanges reads the diff-tree record of commit want.
func (h *History) readChanges(want plumbing.Hash, change func(path []byte, oldMode, newMode filemode.FileMode, oldHash, newHash plumbing.Hash)) error {
	last := h.next == len(h.commits)-1
	ended, err := h.records.read(want, change)
	switch {
	case err != nil:
		return h.diffTree.failed(err)
	case ended && !last:
		return h.diffTree.failed(io.ErrUnexpectedEOF)
	case ended:
		// The last commit ends with the output, but only if git finished its work: a process
		// killed between two entries must not pass for a commit with fewer changes.
		return h.diffTree.wait()
	case last:
		return fmt.Errorf("unexpected output after the last commit: %q", h.records.pending)
	}
	return nil
}

// diffRecords parses the output of `git diff-tree --stdin -r -z --raw --always`: for each commit
// a header, "<commit>\0", then one record per changed entry, ":<old mode> <new mode> <old hash>
// <new hash> <status>\0<path>\0". The paths are the repository's: anyone who can push chooses
// them, so a path is taken as bytes, whatever they are.
type diffRecords struct {
	out     *bufio.Reader
	pending []byte // the next commit's header, read ahead
}

// read reads commit want's record and calls change for each entry. ended is true when the output
// ended right after it.
func (d *diffRecords) read(want plumbing.Hash, change func(path []byte, oldMode, newMode filemode.FileMode, oldHash, newHash plumbing.Hash)) (ended bool, err error) {
	header := d.pending
	d.pending = nil
	if header == nil {
		if header, err = d.token(); err != nil {
			return false, err
		}
	}
	if c, ok := parseHash(header[:len(header)-1]); !ok || c != want {
		return false, fmt.Errorf("unexpected header %q, want %s", header[:len(header)-1], want)
	}
	for {
		rec, err := d.token()
		if err == io.EOF && len(rec) == 0 {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if rec[0] != ':' {
			d.pending = append([]byte(nil), rec...)
			return false, nil
		}
		oldMode, newMode, oldHash, newHash, ok := parseRaw(rec[1 : len(rec)-1])
		if !ok {
			return false, fmt.Errorf("unexpected entry %q", rec[:len(rec)-1])
		}
		path, err := d.token()
		if err != nil {
			return false, err
		}
		change(path[:len(path)-1], oldMode, newMode, oldHash, newHash)
	}
}

// token reads up to and with the next NUL. It is valid until the next read, in the reader's
// buffer unless it is longer (a long path, rare enough to copy).
func (d *diffRecords) token() ([]byte, error) {
	b, err := d.out.ReadSlice(0)
	if !errors.Is(err, bufio.ErrBufferFull) {
		return b, err
	}
	long := append([]byte(nil), b...)
	rest, err := d.out.ReadBytes(0)
	return append(long, rest...), err
}

// parseRaw reads "<old mode> <new mode> <old hash> <new hash> <status>".
func parseRaw(meta []byte) (oldMode, newMode filemode.FileMode, oldHash, newHash plumbing.Hash, ok bool) {
	f := bytes.Fields(meta)
	if len(f) != 5 || len(f[4]) == 0 {
		return 0, 0, plumbing.ZeroHash, plumbing.ZeroHash, false
	}
	om, ok1 := parseMode(f[0])
	nm, ok2 := parseMode(f[1])
	oh, ok3 := parseHash(f[2])
	nh, ok4 := parseHash(f[3])
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return 0, 0, plumbing.ZeroHash, plumbing.ZeroHash, false
	}
	return om, nm, oh, nh, true
}

// parseMode reads a file mode as git's raw format writes it: six octal digits, no more (a longer
// one is not git's, and would not fit the modes go-git compares with).
func parseMode(b []byte) (filemode.FileMode, bool) {
	if len(b) != 6 {
		return 0, false
	}
	m, err := strconv.ParseUint(string(b), 8, 32)
	return filemode.FileMode(m), err == nil
}

// parseHash reads a full hexadecimal SHA-1 object name.
func parseHash(b []byte) (plumbing.Hash, bool) {
	var h plumbing.Hash
	if len(b) != 2*len(h) {
		return h, false
	}
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return h, false
		}
	}
	return plumbing.NewHash(string(b)), true
}

// Close stops what is still running and waits for it: the processes are killed when the reader
// did not take all their output.
func (h *History) Close() error {
	var err error
	for _, c := range []*child{h.catFile, h.diffTree} {
		if c != nil {
			if cerr := c.stop(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("%s: %w", c.name, cerr))
			}
		}
	}
	h.catFile, h.diffTree = nil, nil
	return err
}

// child is one git process fed by a goroutine.
type child struct {
	name    string // the git command, for errors
	cmd     *exec.Cmd
	out     *bufio.Reader
	stderr  *tailBuffer
	quit    chan struct{} // closed to stop the feeder
	fed     sync.WaitGroup
	feedErr error // why the feeder stopped early; read after fed.Wait

	waited  bool
	waitErr error
}

// start runs git with args and a goroutine that writes its input with feed.
func (h *History) start(ctx context.Context, feed func(*bufio.Writer) error, args ...string) (*child, error) {
	cmd := h.command(ctx, args...)
	c := &child{name: "git " + args[0], cmd: cmd, stderr: &tailBuffer{}, quit: make(chan struct{})}
	cmd.Stderr = c.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w", args[0], err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w", args[0], err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git %s: %w", args[0], err)
	}
	c.out = bufio.NewReaderSize(out, 64<<10)
	c.fed.Add(1)
	go func() {
		defer c.fed.Done()
		defer in.Close() // git ends when its input does
		w := bufio.NewWriterSize(&stoppable{w: in, quit: c.quit}, 32<<10)
		if err := feed(w); err != nil {
			c.feedErr = err
			return
		}
		c.feedErr = w.Flush()
	}()
	return c, nil
}

// failed explains a read that failed. When git's output ended early, what git said as it ended;
// other failures (an answer too long to be git's) leave the process to Close, which kills it.
func (c *child) failed(err error) error {
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	if werr := c.wait(); werr != nil {
		return fmt.Errorf("%w: git ended early: %w", io.ErrUnexpectedEOF, werr)
	}
	return fmt.Errorf("%w: git ended its output early", io.ErrUnexpectedEOF)
}

// wait waits for the process to end after its output has been read, and says how it ended.
func (c *child) wait() error {
	if !c.waited {
		c.waited = true
		// Wait closes the input pipe once git has ended, which ends a feeder still writing.
		err := c.cmd.Wait()
		c.fed.Wait()
		if err != nil {
			c.waitErr = fmt.Errorf("%w%s", err, c.stderr.suffix())
		} else if c.feedErr != nil {
			c.waitErr = fmt.Errorf("write its input: %w", c.feedErr)
		}
	}
	return c.waitErr
}

// stop kills the process unless it has ended, stops its feeder and waits for both.
func (c *child) stop() error {
	close(c.quit)
	if c.waited {
		return c.waitErr
	}
	_ = c.cmd.Process.Kill() // an error means it has ended already
	c.waited = true
	_ = c.cmd.Wait() // killed on purpose: its exit status says nothing
	c.fed.Wait()
	return nil
}

// stoppable is a writer that fails once quit is closed, so that a feeder blocked on nothing but
// its own loop stops between two writes.
type stoppable struct {
	w    io.Writer
	quit chan struct{}
}

func (s *stoppable) Write(p []byte) (int, error) {
	select {
	case <-s.quit:
		return 0, errors.New("stopped")
	default:
	}
	return s.w.Write(p)
}

// tailBuffer keeps the last KiB a process wrote to its standard error, for the error that
// explains why it failed.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 1024 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-1024:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) suffix() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := strings.TrimSpace(string(t.buf)); s != "" {
		return ": " + s
	}
	return ""
}
