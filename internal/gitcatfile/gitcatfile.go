// Package gitcatfile reads Git objects through one `git cat-file --batch` process. The ledger's
// first index of a long history spends a fifth of its CPU in go-git's blob reads (most of it
// hashing, with SHA-1 collision detection, every delta base go-git caches); git's own object reader
// does the same work at a fraction of the cost. Only the CLI uses it (cmd/parley wires it into
// trailers/ledger's Options.OpenBlobs): `parley serve` runs where there is no git binary, and the
// layers below cmd run no programs (internal/layering).
package gitcatfile

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
)

// Reader is one `git cat-file --batch` process. Blob asks for one object and waits for it. A
// caller that knows what it will read can ask ahead instead: one goroutine Requests and Flushes,
// another Receives the answers in the same order, so that git reads objects while the caller works
// (a round trip per blob kept the ledger's reader waiting half of home-ops' first index). Otherwise
// it is not safe for concurrent use; its owner closes it when both are done.
type Reader struct {
	cmd *exec.Cmd
	in  *bufio.Writer // the asking side's
	out *bufio.Reader // the receiving side's
	win io.WriteCloser

	waitOnce sync.Once
	waitErr  error
}

// Command is git (bin) run on the repository at gitDir, reading objects as go-git reads them, for
// every git process the CLI starts to read what go-git would: the repository is named on the
// command line, and nothing from the caller's environment (GIT_DIR, GIT_OBJECT_DIRECTORY and the
// like) may point git at other objects. --no-replace-objects: an object is read as its hash names
// it, whatever refs/replace/ in the repository says (a replacement would change a version's
// content without changing its hash).
func Command(ctx context.Context, bin, gitDir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, append([]string{"--git-dir", gitDir, "--no-replace-objects"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// Start runs `git cat-file --batch` on gitDir. It fails when no git binary is in PATH. ctx bounds
// the process's life (it is killed when ctx ends).
func Start(ctx context.Context, gitDir string) (*Reader, error) {
	bin, err := exec.LookPath("git")
	if err != nil {
		return nil, err
	}
	cmd := Command(ctx, bin, gitDir, "cat-file", "--batch")
	win, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	rout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	return &Reader{cmd: cmd, in: bufio.NewWriter(win), out: bufio.NewReaderSize(rout, 64<<10), win: win}, nil
}

// Blob returns blob h's content and size. found is false when git has no such object or it is not
// a blob. A blob larger than maxBytes is skipped: its size is returned without its content. An
// error means the process can no longer be trusted (it died, or answered out of step).
func (r *Reader) Blob(h plumbing.Hash, maxBytes int64) (data []byte, size int64, found bool, err error) {
	if err := r.Request(h); err != nil {
		return nil, 0, false, err
	}
	if err := r.Flush(); err != nil {
		return nil, 0, false, err
	}
	return r.Receive(h, maxBytes)
}

// Request asks for object h; the question is sent with the next Flush (or when the buffer fills).
func (r *Reader) Request(h plumbing.Hash) error {
	if _, err := r.in.WriteString(h.String() + "\n"); err != nil {
		return fmt.Errorf("git cat-file: ask for %s: %w", h, err)
	}
	return nil
}

// Flush sends the requests not sent yet.
func (r *Reader) Flush() error {
	if err := r.in.Flush(); err != nil {
		return fmt.Errorf("git cat-file: ask: %w", err)
	}
	return nil
}

// Receive reads the answer to the oldest request not answered yet, which must be for h; it
// returns what Blob returns.
func (r *Reader) Receive(h plumbing.Hash, maxBytes int64) (data []byte, size int64, found bool, err error) {
	header, err := r.out.ReadString('\n')
	if err != nil {
		return nil, 0, false, fmt.Errorf("git cat-file: read header of %s: %w", h, err)
	}
	// "<oid> <type> <size>" or "<oid> missing".
	fields := strings.Fields(header)
	if len(fields) == 2 && fields[0] == h.String() && fields[1] == "missing" {
		return nil, 0, false, nil
	}
	if len(fields) != 3 || fields[0] != h.String() {
		return nil, 0, false, fmt.Errorf("git cat-file: unexpected header %q for %s", strings.TrimSpace(header), h)
	}
	size, err = strconv.ParseInt(fields[2], 10, 64)
	if err != nil || size < 0 {
		return nil, 0, false, fmt.Errorf("git cat-file: unexpected header %q for %s", strings.TrimSpace(header), h)
	}
	if fields[1] != "blob" || size > maxBytes {
		if _, err := r.out.Discard(int(size) + 1); err != nil {
			return nil, 0, false, fmt.Errorf("git cat-file: read %s: %w", h, err)
		}
		return nil, size, fields[1] == "blob", nil
	}
	buf := make([]byte, size+1) // the content and git's closing newline
	if _, err := io.ReadFull(r.out, buf); err != nil {
		return nil, 0, false, fmt.Errorf("git cat-file: read %s: %w", h, err)
	}
	if buf[size] != '\n' {
		return nil, 0, false, fmt.Errorf("git cat-file: %s does not end where its header says", h)
	}
	if size == 0 {
		return nil, 0, true, nil // as go-git reads an empty blob
	}
	return buf[:size:size], size, true, nil
}

// Abort kills the process, for a receiver that cannot trust it any more while its asking side may
// still be writing: the asker's writes then fail instead of waiting on a git that waits for its
// answers to be read.
func (r *Reader) Abort() {
	_ = r.cmd.Process.Kill()
	_ = r.wait()
}

func (r *Reader) wait() error {
	r.waitOnce.Do(func() { r.waitErr = r.cmd.Wait() })
	return r.waitErr
}

// Close ends the process (closing its input ends git) and waits for it. Answers asked for and not
// received (an update stopped midway) are read and dropped: git writes them before it reads the end
// of its input, and would wait forever for a reader otherwise.
func (r *Reader) Close() error {
	_ = r.win.Close()
	_, _ = io.Copy(io.Discard, r.out)
	return r.wait()
}
