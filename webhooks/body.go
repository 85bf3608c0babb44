package webhooks

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"

	"golang.org/x/time/rate"

	"github.com/parleyhq/parley/webhooks/guard"
)

// SpoolThreshold is the most of an unauthenticated body held in memory: a larger one (declared
// larger, or grown past it) is written to a temporary file as it streams, so that bodies waiting
// for their signature cost disk, not the server's memory. The file is unlinked as soon as it is
// created, so nothing is left behind, even by a crash.
const SpoolThreshold = 1 << 20

// errBodyBudget is a body refused because it would take the unauthenticated body budget (or its
// client's share) over its cap.
var errBodyBudget = errors.New("too many unauthenticated request bodies are being received; send it again after Retry-After seconds")

// errSpool is a spool file that could not be written: the server's fault, answered 503.
var errSpool = errors.New("the request body could not be spooled to a temporary file")

// readBuffers are the read buffers of readPending, shared so that a flood of requests does not
// allocate one each.
var readBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// pendingBody is a request body read before its credentials were checked: in memory up to
// SpoolThreshold, else in an unlinked temporary file, its bytes reserved in the Bodies budget
// until Close.
type pendingBody struct {
	mem  []byte
	file *os.File
	// size is the body's length; spooled is how much of it is in file.
	size, spooled int64
	hold          *guard.Hold
	endpoint      string
	spoolDir      string
	noSpool       bool
	// spoolErr is why the body could not be spooled (it was then kept in memory, within the
	// budget all the same); the receiver logs it.
	spoolErr error
}

// intake is where and within what readPending holds a body.
type intake struct {
	// budget caps unauthenticated bodies (nil: no cap); endpoint names the endpoint in its
	// metric.
	budget   *guard.Bodies
	endpoint string
	// spoolDir is where a body past SpoolThreshold is spooled ("": os.TempDir()); noSpool keeps
	// every body in memory (one already authenticated, by a bearer token).
	spoolDir string
	noSpool  bool
	// pace, when set, holds the reading to its rate (guard.Failures.Pace: a client over its
	// failed-authentication budget).
	pace *rate.Limiter
}

// readPending reads req's body, at most limit bytes (the caller has refused a larger declared
// Content-Length), writing every byte to hashes as it arrives, so that the signature can be
// checked without another pass over it. Its bytes are reserved in in.budget before they are
// held: a declared length at once, before anything is read (errBodyBudget when it does not
// fit); a body of unknown length as it grows. The returned body is never nil and must be closed.
func readPending(w http.ResponseWriter, req *http.Request, limit int64, in intake, hashes ...io.Writer) (*pendingBody, error) {
	p := &pendingBody{hold: in.budget.Hold(req), endpoint: in.endpoint, spoolDir: in.spoolDir, noSpool: in.noSpool}
	if cl := req.ContentLength; cl > 0 {
		// Declared: reserved whole before a byte is read, so a request that does not fit costs
		// nothing. net/http stops the body at its Content-Length, so no more ever arrives. One
		// that does not fit waits a moment for room rather than being refused at once.
		if !p.hold.GrowWait(req.Context(), cl, in.endpoint, guard.WaitForRoom) {
			return p, errBodyBudget
		}
		if cl <= SpoolThreshold || in.noSpool {
			p.mem = make([]byte, 0, cl)
		} else {
			p.spool()
		}
	}
	rd := http.MaxBytesReader(w, req.Body, limit)
	bufp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bufp)
	buf := *bufp
	for {
		n, err := rd.Read(buf)
		if n > 0 && in.pace != nil {
			if werr := in.pace.WaitN(req.Context(), n); werr != nil { // n <= 32 KiB <= guard.PaceBurst
				return p, werr
			}
		}
		if n > 0 {
			chunk := buf[:n]
			if werr := p.add(chunk); werr != nil {
				return p, werr
			}
			for _, h := range hashes {
				_, _ = h.Write(chunk) // a hash.Hash never fails
			}
		}
		if err == io.EOF {
			return p, nil
		}
		if err != nil {
			return p, err
		}
	}
}

// add appends chunk to the body, reserving first whatever more it will hold.
func (p *pendingBody) add(chunk []byte) error {
	n := int64(len(chunk))
	if p.file == nil && int64(len(p.mem))+n > int64(cap(p.mem)) {
		if p.size+n > SpoolThreshold && p.spool() {
			// From here on the body goes to the file.
		} else {
			// Room for the body of unknown length (or one that could not be spooled) grows by
			// doubling; what is reserved is the capacity, not the length, since that is what is
			// held.
			newCap := max(2*cap(p.mem), len(p.mem)+len(chunk), 4096)
			if !p.reserve(int64(newCap) + p.spooled) {
				return errBodyBudget
			}
			grown := make([]byte, len(p.mem), newCap)
			copy(grown, p.mem)
			p.mem = grown
		}
	}
	if p.file != nil {
		if !p.reserve(int64(cap(p.mem)) + p.spooled + n) {
			return errBodyBudget
		}
		if _, err := p.file.Write(chunk); err != nil {
			return fmt.Errorf("%w: %w", errSpool, err)
		}
		p.spooled += n
	} else {
		p.mem = append(p.mem, chunk...)
	}
	p.size += n
	return nil
}

// reserve makes sure the hold covers total bytes.
func (p *pendingBody) reserve(total int64) bool {
	return p.hold.Grow(total-p.held(), p.endpoint)
}

// held is what the hold covers now.
func (p *pendingBody) held() int64 { return p.hold.Held() }

// spool moves the body to a temporary file, reporting whether it did; when it cannot, the body
// stays in memory (still within the budget) and spoolErr says why.
func (p *pendingBody) spool() bool {
	if p.noSpool {
		return false
	}
	f, err := os.CreateTemp(p.spoolDir, "parley-body-*")
	if err != nil {
		p.spoolErr = err
		return false
	}
	// Unlinked at once: the open file keeps its bytes until it is closed, and nothing is left
	// in the directory whatever happens to the process.
	_ = os.Remove(f.Name())
	if len(p.mem) > 0 {
		if _, err := f.Write(p.mem); err != nil {
			_ = f.Close()
			p.spoolErr = err
			return false
		}
		p.spooled = int64(len(p.mem))
	}
	p.file = f
	// The memory stays reserved until Close: it is garbage, not yet returned.
	p.mem = nil
	return true
}

// Bytes is the whole body in memory, for a request whose credentials verified: read back from
// the spool file into a slice of exactly its size.
func (p *pendingBody) Bytes() ([]byte, error) {
	if p.file == nil {
		return p.mem, nil
	}
	out := make([]byte, p.size)
	if _, err := p.file.ReadAt(out, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read the spooled body back: %w", err)
	}
	return out, nil
}

// Close removes the spool file and gives the body's bytes back to the budget; it may be called
// more than once.
func (p *pendingBody) Close() {
	if p.file != nil {
		_ = p.file.Close()
		p.file = nil
	}
	p.hold.Release()
}

// readAuthenticated reads the body of a request whose credentials were verified from its headers
// alone (a Firehose access key, a Pub/Sub push token): at most limit bytes, in memory, outside the
// unauthenticated body budget, which is for senders not yet known.
func readAuthenticated(w http.ResponseWriter, req *http.Request, limit int64, endpoint string) ([]byte, error) {
	p, err := readPending(w, req, limit, intake{endpoint: endpoint, noSpool: true})
	defer p.Close()
	if err != nil {
		return nil, err
	}
	return p.Bytes()
}
