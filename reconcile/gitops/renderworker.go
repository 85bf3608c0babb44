package gitops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"

	"github.com/parleyhq/parley/core"
)

// Helm's template engine takes no context and checks no clock: a chart whose template loops
// ({{ range until 100000 }} nested twice) runs for as long as it likes, and one that builds a
// large string takes as much memory as it likes, whatever the caller's context says. Kustomize is
// the same: krusty's Run takes no context, and an overlay tree whose every level names both halves
// of the level below builds 2^depth copies of its base (48 small files ran for over 12 minutes and
// ignored SIGTERM). Argo CD's repo server renders and builds in a child process under an exec
// timeout for this reason. Parley does the same: a RenderProcess runs each render and each build in
// a child (the parley binary re-executed as a hidden worker), kills it when the time budget is spent
// or the work is cancelled, and has the child cap its own memory before it reads anything (see
// limitMemory).

// HelmJob is one chart release to render: what a child process is given on standard input.
type HelmJob struct {
	Chart     string            `json:"chart"`     // the chart's directory in the repository, for messages
	Files     map[string][]byte `json:"files"`     // the chart's files, by path inside the chart
	Values    string            `json:"values"`    // the release's values over the chart's, as YAML
	Release   string            `json:"release"`   // the release name
	Namespace string            `json:"namespace"` // the release namespace
}

// HelmRenderer renders a chart release: the engine's output, template name to text.
type HelmRenderer interface {
	RenderHelm(ctx context.Context, job HelmJob) (map[string]string, error)
}

// InProcess renders in the calling process with the Helm SDK: fast, and right for charts the
// caller trusts, but a template that loops or grows is neither stopped nor bounded.
type InProcess struct{}

// RenderHelm implements HelmRenderer.
func (InProcess) RenderHelm(_ context.Context, job HelmJob) (map[string]string, error) {
	return renderJob(job)
}

// renderJob is the Helm SDK's rendering of a job, as helm-controller and Argo CD's repo server do
// it for an install.
func renderJob(job HelmJob) (map[string]string, error) {
	var files []*loader.BufferedFile
	for _, name := range slices.Sorted(maps.Keys(job.Files)) {
		files = append(files, &loader.BufferedFile{Name: name, Data: job.Files[name]})
	}
	chrt, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", job.Chart, err)
	}
	values, err := unmarshalStringMap([]byte(job.Values))
	if err != nil {
		return nil, fmt.Errorf("values for chart %s: %w", job.Chart, err)
	}
	vals, err := chartutil.ToRenderValues(chrt, values, chartutil.ReleaseOptions{Name: job.Release, Namespace: job.Namespace, IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("values for chart %s: %w", job.Chart, err)
	}
	out, err := engine.Render(chrt, vals)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", job.Chart, err)
	}
	return out, nil
}

// RenderMemoryEnv is the environment variable that carries a worker's memory budget in bytes.
const RenderMemoryEnv = "PARLEY_RENDER_WORKER_MEMORY"

// WorkerServe is the argument a RenderProcess appends to its Command: the worker takes jobs in
// turn on its standard input.
const WorkerServe = "serve"

// The kinds of job a render worker does.
const (
	WorkerHelm      = "helm"      // render one chart release: a HelmJob
	WorkerKustomize = "kustomize" // build one kustomization: a KustomizeJob
)

// workerJob is one request to a worker: one JSON line on its standard input, exactly one field set.
type workerJob struct {
	Helm      *HelmJob      `json:"helm,omitempty"`
	Kustomize *KustomizeJob `json:"kustomize,omitempty"`
}

// ServeWorker is the child's side of a RenderProcess: it caps its own memory at the budget in
// RenderMemoryEnv (before it reads any job, so a job's size counts too), then reads jobs from in,
// one JSON line each (a HelmJob or a KustomizeJob), does each and writes its answer to out as one
// JSON line, until in ends. An error of the work itself (a template that fails, a kustomization
// kustomize refuses) is written to out as {"error": ...} and the worker takes the next job: the
// parent tells work that fails from a worker that died. `parley render-worker serve` runs it.
func ServeWorker(mode string, in io.Reader, out io.Writer) error {
	if mode != WorkerServe {
		return fmt.Errorf("render worker %q: want %s", mode, WorkerServe)
	}
	if s := os.Getenv(RenderMemoryEnv); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("%s=%q: want a number of bytes", RenderMemoryEnv, s)
		}
		// The budget is what the work may use beyond the worker itself: the parley binary's own
		// data segment at start (its runtime and its packages' state, about 80–130 MiB) is added,
		// so a budget of 64 MiB renders a chart that needs 64 MiB instead of leaving no room at
		// all (every job then died of the binary's size, whatever it rendered).
		own, _ := dataSegment(os.Getpid())
		if err := limitMemory(own + n); err != nil {
			return fmt.Errorf("limit memory to %d bytes (%d of the worker's own and the budget %d): %w", own+n, own, n, err)
		}
	}
	jobs, answers := json.NewDecoder(in), json.NewEncoder(out)
	for n := 1; ; n++ {
		var job workerJob
		if err := jobs.Decode(&job); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("read job %d: %w", n, err)
		}
		var answer workerAnswer
		var err error
		switch {
		case job.Helm != nil && job.Kustomize == nil:
			answer.Rendered, err = renderJob(*job.Helm)
		case job.Kustomize != nil && job.Helm == nil:
			answer.Built, err = buildJob(*job.Kustomize)
		default:
			return fmt.Errorf("job %d: want exactly one of %s and %s", n, WorkerHelm, WorkerKustomize)
		}
		if err != nil {
			answer = workerAnswer{Error: err.Error()}
		}
		if err := answers.Encode(answer); err != nil { // one Write: the line and its newline
			return fmt.Errorf("answer job %d: %w", n, err)
		}
	}
}

// workerAnswer is what a worker writes back.
type workerAnswer struct {
	Rendered map[string]string `json:"rendered,omitempty"` // a chart's templates, rendered
	Built    []byte            `json:"built,omitempty"`    // kustomize's output, byte for byte
	Error    string            `json:"error,omitempty"`
}

// setGoMemoryLimit makes the worker's garbage collector work hard as the hard limit nears, so work
// that fits is not killed for garbage it left; the hard limit (limitMemory) is what stops work that
// does not fit.
func setGoMemoryLimit(n int64) { debug.SetMemoryLimit(n * 3 / 4) }

// RenderProcess renders each chart and builds each kustomization in a child process under a time
// and a memory budget, a few at a time. The child is killed when a job's Timeout passes or the
// caller's context ends; one that exceeds Memory dies of it. Either way the chart or the overlay is
// reported as not rendered (not built), with why. It is a HelmRenderer and a KustomizeBuilder;
// charts and builds share its budgets and its Parallel slots.
//
// A worker takes jobs in turn and is kept between them (see renderpool.go): starting the parley
// binary costs far more than a small overlay's build. Whoever makes a RenderProcess closes it
// (Close) when its work is done, which ends the workers kept idle.
type RenderProcess struct {
	// Command is the worker's argv without its mode, which is appended ("serve"): a program that
	// runs ServeWorker, such as []string{os.Executable(), "render-worker"}.
	Command []string
	// Env is added to the worker's environment (which is otherwise this process's).
	Env []string
	// Timeout is how long one chart or build may take, from when it is handed to a worker.
	// Default 30s.
	Timeout time.Duration
	// Memory is the most memory (data segment: heap and private mappings) a worker may use, in
	// bytes. Default 512 MiB.
	Memory int64
	// Parallel is how many workers run at once, and so the most kept idle. Default 2.
	Parallel int

	once    sync.Once
	slots   chan struct{}
	pool    pool
	started func(pid int) // tests: called once a worker runs
}

// Defaults of RenderProcess.
const (
	DefaultRenderTimeout  = 30 * time.Second
	DefaultRenderMemory   = 512 << 20
	DefaultRenderParallel = 2
)

// ErrChartNotRendered wraps every reason a RenderProcess gives up on a chart (the time budget, the
// memory budget, cancellation, a worker that failed); ErrNotBuilt the same for a kustomization.
var (
	ErrChartNotRendered = errors.New("not rendered")
	ErrNotBuilt         = errors.New("not built")
)

// work names one job of a RenderProcess in what it reports.
type work struct {
	name    string // "chart charts/web", "k8s/overlays/prod"
	stopped error  // ErrChartNotRendered or ErrNotBuilt
	given   string // what the budgets are given to: "a chart to render"
}

// RenderHelm implements HelmRenderer.
func (p *RenderProcess) RenderHelm(ctx context.Context, job HelmJob) (map[string]string, error) {
	answer, err := p.run(ctx, work{"chart " + job.Chart, ErrChartNotRendered, "a chart to render"}, workerJob{Helm: &job})
	if err != nil {
		return nil, err
	}
	return answer.Rendered, nil
}

// BuildKustomization implements KustomizeBuilder.
func (p *RenderProcess) BuildKustomization(ctx context.Context, job KustomizeJob) ([]byte, error) {
	answer, err := p.run(ctx, work{job.Dir, ErrNotBuilt, "a kustomize build"}, workerJob{Kustomize: &job})
	if err != nil {
		return nil, err
	}
	return answer.Built, nil
}

// Close ends the workers kept idle; a worker busy with a job ends when its job does. Jobs given
// after Close are refused. It is safe to call more than once.
func (p *RenderProcess) Close() error {
	p.pool.close()
	return nil
}

// run does one job in a worker and returns its answer: the error of the work itself (answer.Error)
// as it is, every failure of the worker wrapped in w.stopped with w.name and why.
func (p *RenderProcess) run(ctx context.Context, w work, job workerJob) (workerAnswer, error) {
	timeout, memory := p.Timeout, p.Memory
	if timeout <= 0 {
		timeout = DefaultRenderTimeout
	}
	if memory <= 0 {
		memory = DefaultRenderMemory
	}
	p.once.Do(func() { p.slots = make(chan struct{}, max(1, cmp(p.Parallel, DefaultRenderParallel))) })
	if len(p.Command) == 0 {
		return workerAnswer{}, fmt.Errorf("%s: %w: no render worker command", w.name, w.stopped)
	}
	select {
	case p.slots <- struct{}{}:
		defer func() { <-p.slots }()
	case <-ctx.Done():
		return workerAnswer{}, fmt.Errorf("%s: %w: cancelled (%v)", w.name, w.stopped, context.Cause(ctx))
	}
	frame, err := json.Marshal(job)
	if err != nil {
		return workerAnswer{}, fmt.Errorf("%s: encode the job: %w", w.name, err)
	}
	frame = append(frame, '\n')
	// A job whose worker dies having done other jobs before is done once more in a fresh worker,
	// so that a job is reported as failed (out of memory above all) only by a worker that did
	// nothing else: as strict as a worker per job, and never stricter (see pool).
	for fresh := false; ; fresh = true {
		wk, reused, err := p.pool.take(p, memory, fresh)
		if err != nil {
			return workerAnswer{}, fmt.Errorf("%s: %w: %v", w.name, w.stopped, err)
		}
		answer, f := wk.do(ctx, frame, timeout, memory)
		if f == nil {
			p.pool.give(wk, memory)
			if answer.Error != "" {
				return workerAnswer{}, errors.New(answer.Error)
			}
			return answer, nil
		}
		switch {
		case f.kind == failTime:
			return workerAnswer{}, fmt.Errorf("%s: %w: stopped after %s, the time Parley gives %s", w.name, w.stopped, timeout, w.given)
		case f.kind == failCancelled || ctx.Err() != nil:
			return workerAnswer{}, fmt.Errorf("%s: %w: cancelled (%v)", w.name, w.stopped, context.Cause(ctx))
		case f.kind == failOutput:
			return workerAnswer{}, fmt.Errorf("%s: %w: its output is above %s", w.name, w.stopped, core.Size(memory))
		case f.kind == failDied && reused:
			continue
		case f.kind == failDied && outOfMemory(f.stderr):
			return workerAnswer{}, fmt.Errorf("%s: %w: it needs more than the %s of memory Parley gives %s", w.name, w.stopped, core.Size(memory), w.given)
		case f.kind == failDied:
			return workerAnswer{}, fmt.Errorf("%s: %w: the render worker failed (%v): %s", w.name, w.stopped, f.err, lastLine(f.stderr))
		default: // failFrame
			return workerAnswer{}, fmt.Errorf("%s: %w: the render worker's answer: %v", w.name, w.stopped, f.err)
		}
	}
}

var errTimeBudget = errors.New("the render budget's time is spent")

func cmp(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// outOfMemory reports whether a worker's standard error says the Go runtime died for want of
// memory: the first line of its crash is a fatal error saying "out of memory" ("fatal error:
// runtime: out of memory", "fatal error: out of memory allocating heap arena metadata") or, when
// the kernel refuses a mapping under the limit, "cannot allocate memory".
//
// Under RLIMIT_DATA the runtime does not always get as far as saying so: seen here (go1.26, the
// green tea collector), a mapping refused in the middle of a collection ends the worker with a
// fault inside the runtime itself ("SIGSEGV: segmentation violation" as the first line, about one
// run in eight of a chart that grows without bound). A fault in Go code, Helm's or Parley's, is a
// "panic: runtime error" instead; a fault of the runtime in a worker whose one unusual condition is
// its data limit is taken for that limit. So is a thread the runtime cannot start ("runtime/cgo:
// pthread_create failed: Resource temporarily unavailable", or without cgo "runtime: failed to
// create new OS thread"): a thread's stack is a private writable mapping, which RLIMIT_DATA counts,
// seen here about one run in four of an overlay that grows.
func outOfMemory(stderr string) bool {
	first, _, _ := strings.Cut(strings.TrimSpace(stderr), "\n")
	return strings.HasPrefix(first, "fatal error: ") &&
		(strings.Contains(first, "out of memory") || strings.Contains(first, "cannot allocate memory")) ||
		strings.HasPrefix(first, "SIGSEGV: segmentation violation") ||
		strings.HasPrefix(first, "fatal error: unexpected signal during runtime execution") ||
		strings.HasPrefix(first, "runtime/cgo: pthread_create failed: Resource temporarily unavailable") ||
		strings.HasPrefix(first, "runtime: failed to create new OS thread")
}

// lastLine is the last line of a worker's standard error: the reason it gave, for the problem.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
