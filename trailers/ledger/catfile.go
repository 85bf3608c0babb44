package ledger

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// catFile reads blobs through one `git cat-file --batch` process. Measured on argo-cd's whole
// history, go-git spends about a fifth of a first index resolving deltas of blobs, most of it
// hashing (with SHA-1 collision detection) every delta base it puts in its object cache; git's
// own object reader does the same work at a fraction of the CPU. go-git stays the reader for
// trees and commits, and for blobs where no git binary runs (Options.GoGitBlobs, no git in PATH,
// a repository git refuses to open): both give the same bytes, and the ledger's tests run on both.
//
// The process belongs to one Update: the reader goroutine is its only user, and Update closes it
// when it returns (ending stdin ends git; the update's context kills it if it hangs).
type catFile struct {
	cmd *exec.Cmd
	in  *bufio.Writer
	out *bufio.Reader
	win io.WriteCloser
}

// errCatFileMissing is cat-file's answer for an object it does not have: the caller asks go-git,
// whose error the ledger records, so that a problem reads the same whichever reader ran.
var errCatFileMissing = errors.New("git cat-file: object missing")

// startCatFile starts `git cat-file --batch` on gitDir. It fails when no git binary is in PATH.
func startCatFile(ctx context.Context, gitDir string) (*catFile, error) {
	bin, err := exec.LookPath("git")
	if err != nil {
		return nil, err
	}
	// --no-replace-objects: an object is read as its hash names it, as go-git reads it, whatever
	// refs/replace/ in the repository says (a replacement would change a version's content
	// without changing its hash).
	cmd := exec.CommandContext(ctx, bin, "--git-dir", gitDir, "--no-replace-objects", "cat-file", "--batch")
	// The repository is named on the command line: GIT_DIR, GIT_OBJECT_DIRECTORY and the like from
	// the caller's environment must not point git at other objects than go-git reads.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
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
	return &catFile{cmd: cmd, in: bufio.NewWriter(win), out: bufio.NewReaderSize(rout, 64<<10), win: win}, nil
}

// blob returns blob h's content, or an error naming it when it is larger than maxBytes (its
// content is skipped and the process stays usable). errCatFileMissing means git has no such
// object; any other error means the process can no longer be trusted.
func (c *catFile) blob(h plumbing.Hash, maxBytes int64) ([]byte, error) {
	if _, err := c.in.WriteString(h.String() + "\n"); err != nil {
		return nil, fmt.Errorf("git cat-file: ask for %s: %w", h, err)
	}
	if err := c.in.Flush(); err != nil {
		return nil, fmt.Errorf("git cat-file: ask for %s: %w", h, err)
	}
	header, err := c.out.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("git cat-file: read header of %s: %w", h, err)
	}
	// "<oid> <type> <size>" or "<oid> missing".
	fields := strings.Fields(header)
	if len(fields) == 2 && fields[0] == h.String() && fields[1] == "missing" {
		return nil, errCatFileMissing
	}
	if len(fields) != 3 || fields[0] != h.String() {
		return nil, fmt.Errorf("git cat-file: unexpected header %q for %s", strings.TrimSpace(header), h)
	}
	size, err := strconv.ParseInt(fields[2], 10, 64)
	if err != nil || size < 0 {
		return nil, fmt.Errorf("git cat-file: unexpected header %q for %s", strings.TrimSpace(header), h)
	}
	if fields[1] != "blob" {
		// Not a blob: skip it, and let go-git say what it is.
		if _, err := c.out.Discard(int(size) + 1); err != nil {
			return nil, fmt.Errorf("git cat-file: read %s: %w", h, err)
		}
		return nil, errCatFileMissing
	}
	if size > maxBytes {
		if _, err := c.out.Discard(int(size) + 1); err != nil {
			return nil, fmt.Errorf("git cat-file: read %s: %w", h, err)
		}
		return nil, tooLargeError{h, size, maxBytes}
	}
	data := make([]byte, size+1) // the content and git's closing newline
	if _, err := io.ReadFull(c.out, data); err != nil {
		return nil, fmt.Errorf("git cat-file: read %s: %w", h, err)
	}
	if data[size] != '\n' {
		return nil, fmt.Errorf("git cat-file: %s does not end where its header says", h)
	}
	if size == 0 {
		return nil, nil // as go-git reads an empty blob
	}
	return data[:size:size], nil
}

// tooLargeError is a blob the ledger does not parse, whichever reader found its size.
type tooLargeError struct {
	h         plumbing.Hash
	size, max int64
}

func (e tooLargeError) Error() string {
	return fmt.Sprintf("blob %s is %d bytes, more than the %d the ledger parses", e.h, e.size, e.max)
}

// close ends the process and waits for it.
func (c *catFile) close() {
	_ = c.win.Close()
	_ = c.cmd.Wait()
}
