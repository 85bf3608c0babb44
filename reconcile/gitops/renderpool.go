package gitops

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// A RenderProcess keeps its workers between jobs: starting the parley binary (about 87 ms) costs
// far more than rendering a small chart or building a small overlay (about 5 ms), and discovery
// does one per chart and per overlay. A worker reads one job at a time as a JSON line on its
// standard input and answers with one JSON line on its standard output (encoding/json writes
// neither a raw newline inside a value, so a line is a frame).
//
// The budgets stay per job, as strict as a worker per job:
//
//   - Time: a job's deadline runs from when it is handed to the worker (its line written), and is
//     the deadline of the write and of the read of its answer; when it passes, or the caller's
//     context ends, the worker is killed (Helm's engine and krusty take no context) and the next
//     job gets a fresh worker.
//   - Memory: RLIMIT_DATA caps the whole process, not a job, and the Go runtime never unmaps its
//     heap: after a heavy job the worker's data segment stays at that job's peak though the heap is
//     free again. The next job reuses that space (the runtime reuses what it mapped), so it is not
//     counted twice, but what an earlier job left behind (fragmentation, anything kept live) is
//     memory the next job does not get. So (1) a worker whose data segment grew by more than a
//     quarter of the budget since its first job is retired rather than kept (retireData), (2) a worker is retired after
//     retireJobs jobs, which bounds what a leak can take, and (3) a job whose reused worker dies
//     (of memory above all) is done once more in a fresh worker: "it needs more than the memory
//     Parley gives" is only ever said by a worker that did nothing else, as before, and a job is
//     never refused memory an earlier job took. The price is that a job that does not fit may run
//     twice, the second time in a worker of its own.
//   - Output: an answer is read up to the memory budget, as before; a longer one kills the worker.
//
// A worker that misbehaves (an answer that is not one, an answer too long, an exit between jobs)
// is killed and reported; nothing it writes is trusted to be well formed. Idle workers are ended by
// RenderProcess.Close; should the parent die without it, a worker's input ends with the parent and
// the worker exits on its own (ServeWorker returns at the end of its input).

// retireJobs is how many jobs a worker does before it is retired, which bounds what a leak in Helm
// or kustomize (or a cache that grows with every repository) can take from later jobs.
const retireJobs = 200

// retireData reports whether a worker whose data segment is data bytes after a job, and was first
// after its first job, is retired: grown by more than a quarter of the budget. Growth, not the
// size: the parley binary's own data segment is about 125 MiB before it reads a job (its package
// data and the runtime's; more under the race detector), which no share of a small budget
// allows for. The retry in a fresh worker (run) is what keeps the budget exact; this spares most
// jobs that would retry.
func retireData(data, first, memory int64) bool { return data-first > memory/4 }

// pool is a RenderProcess's idle workers: at most one per parallel slot, since a worker is idle
// only after a slot's job.
type pool struct {
	mu     sync.Mutex
	idle   []*worker
	closed bool
}

// take returns an idle worker, or starts one (always, when fresh); reused says it has done jobs.
func (pl *pool) take(p *RenderProcess, memory int64, fresh bool) (w *worker, reused bool, err error) {
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		return nil, false, errors.New("the render process is closed")
	}
	if !fresh && len(pl.idle) > 0 {
		w = pl.idle[len(pl.idle)-1]
		pl.idle = pl.idle[:len(pl.idle)-1]
		pl.mu.Unlock()
		return w, true, nil
	}
	pl.mu.Unlock()
	w, err = startWorker(p, memory)
	return w, false, err
}

// give takes back a worker whose job was answered: kept idle, or retired (retireJobs, retireData),
// or ended if the pool was closed meanwhile.
func (pl *pool) give(w *worker, memory int64) {
	data, ok := dataSegment(w.cmd.Process.Pid)
	if w.done == 1 {
		w.firstData = data
	}
	if w.done >= retireJobs || ok && retireData(data, w.firstData, memory) {
		w.end()
		return
	}
	pl.mu.Lock()
	if !pl.closed {
		pl.idle = append(pl.idle, w)
		pl.mu.Unlock()
		return
	}
	pl.mu.Unlock()
	w.end()
}

// close ends the idle workers and refuses what is given later.
func (pl *pool) close() {
	pl.mu.Lock()
	idle := pl.idle
	pl.idle, pl.closed = nil, true
	pl.mu.Unlock()
	for _, w := range idle {
		w.end()
	}
}

// worker is one running `parley render-worker serve`.
type worker struct {
	cmd     *exec.Cmd
	jobs    *os.File      // its standard input
	out     *os.File      // its standard output, whose deadlines bound a job
	answers *bufio.Reader // out, read a line at a time
	stderr  *stderrBuffer
	done    int // jobs answered

	firstData int64 // its data segment after its first job (retireData)
}

// startWorker starts a worker of p under the memory budget. The pipes are the worker's own files
// (not io.Readers exec copies in a goroutine of its own), so that their deadlines are a job's.
func startWorker(p *RenderProcess, memory int64) (*worker, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start the render worker: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("start the render worker: %w", err)
	}
	cmd := exec.Command(p.Command[0], append(slices.Clone(p.Command[1:]), WorkerServe)...)
	cmd.Env = append(append(os.Environ(), p.Env...), RenderMemoryEnv+"="+strconv.FormatInt(memory, 10))
	stderr := &stderrBuffer{max: 64 << 10}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, stderr
	cmd.WaitDelay = time.Second // a killed worker's standard error is closed, not waited on
	err = cmd.Start()
	inR.Close() // the worker's ends: it holds its own copies
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("start the render worker: %w", err)
	}
	if p.started != nil {
		p.started(cmd.Process.Pid)
	}
	return &worker{cmd: cmd, jobs: inW, out: outR, answers: bufio.NewReader(outR), stderr: stderr}, nil
}

// The ways a job's worker fails it.
const (
	failTime      = iota + 1 // its deadline passed
	failCancelled            // the caller's context ended
	failOutput               // its answer is above the memory budget
	failDied                 // it exited (killed for memory, crashed) before answering
	failFrame                // it answered something that is not an answer
)

type failure struct {
	kind   int
	err    error
	stderr string // failDied: what the worker said
}

// do hands w the job (frame, one JSON line) and reads its answer within timeout. On any failure w
// is ended: only a worker that answered is given back.
func (w *worker) do(ctx context.Context, frame []byte, timeout time.Duration, memory int64) (workerAnswer, *failure) {
	w.stderr.Reset()
	deadline := time.Now().Add(timeout)
	w.jobs.SetWriteDeadline(deadline)
	w.out.SetReadDeadline(deadline)
	cancelled := false
	stop := context.AfterFunc(ctx, func() {
		// Wakes the write or the read at once; the worker is killed below.
		w.jobs.SetWriteDeadline(time.Unix(1, 0))
		w.out.SetReadDeadline(time.Unix(1, 0))
	})
	_, err := w.jobs.Write(frame)
	var line []byte
	if err == nil {
		line, err = readFrame(w.answers, memory)
	}
	if !stop() {
		cancelled = true // the deadlines were moved: w is not to be reused even if it answered
	}
	if err == nil && !cancelled {
		answer, err := decodeAnswer(line)
		if err != nil {
			w.end()
			return workerAnswer{}, &failure{kind: failFrame, err: err}
		}
		w.done++
		return answer, nil
	}
	waitErr := w.end()
	switch {
	case cancelled || ctx.Err() != nil:
		return workerAnswer{}, &failure{kind: failCancelled, err: err}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return workerAnswer{}, &failure{kind: failTime, err: err}
	case errors.Is(err, errFrameTooLong):
		return workerAnswer{}, &failure{kind: failOutput, err: err}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.EPIPE):
		if waitErr == nil {
			waitErr = errors.New("it exited before answering")
		}
		return workerAnswer{}, &failure{kind: failDied, err: waitErr, stderr: w.stderr.String()}
	default:
		return workerAnswer{}, &failure{kind: failFrame, err: err}
	}
}

// end kills w and waits for it: the error it exited with (nil if it exited cleanly before).
func (w *worker) end() error {
	w.jobs.Close() // a worker between jobs ends at its input's end; one in a job is killed
	w.cmd.Process.Kill()
	err := w.cmd.Wait()
	w.out.Close()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signaled() && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL {
		return nil // our own kill is not the worker's failure
	}
	return err
}

var errFrameTooLong = errors.New("answer too long")

// readFrame reads one line (its newline included) of at most max bytes from r. A line longer than
// max is errFrameTooLong, read no further; a stream that ends inside a line is
// io.ErrUnexpectedEOF, one that ends before a line io.EOF.
func readFrame(r *bufio.Reader, max int64) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if int64(len(line))+int64(len(chunk)) > max {
			return nil, fmt.Errorf("%w: above %d bytes", errFrameTooLong, max)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// decodeAnswer decodes one answer line: a JSON object with workerAnswer's fields and nothing else,
// on one line.
func decodeAnswer(line []byte) (workerAnswer, error) {
	var answer workerAnswer
	body := bytes.TrimSuffix(line, []byte("\n"))
	if len(body) == 0 || body[0] != '{' {
		return workerAnswer{}, fmt.Errorf("want a JSON object on one line, got %q", truncate(body, 40))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&answer); err != nil {
		return workerAnswer{}, fmt.Errorf("%w in %q", err, truncate(body, 40))
	}
	if dec.More() || dec.InputOffset() != int64(len(body)) {
		return workerAnswer{}, fmt.Errorf("more than one JSON object on the line %q", truncate(body, 40))
	}
	return answer, nil
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// stderrBuffer keeps the first max bytes a worker writes on standard error since its job began
// (exec copies into it from a goroutine of its own, hence the lock): a crash's first line is what
// outOfMemory reads.
type stderrBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *stderrBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil // keep draining, so the worker is not blocked on a full pipe
}

func (b *stderrBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

func (b *stderrBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
