// Command admission measures parley serve's admission webhook end to end, as the API server of a
// busy cluster calls it: the parley binary, started with an admission listener (TLS from a CA this
// program generates, the API server's bearer token) over the busy repository (internal/busycluster:
// the demo plus 1,000 Deployments, 10,000 fields under the policy) hosted by the fake GitHub, is
// sent AdmissionReview v1 requests open loop at -rate for -duration in the busy cluster's mix (half
// the HPA scaling, accepted and recorded as standing claims; 3 in 10 the cost optimizer scaling
// down, refused; 2 in 10 ConfigMaps no field block covers). In the same run, at the same moments,
// the same requests go to an allow-all webhook (decode, answer allowed) in a process of its own,
// over the same kind of TLS connection: the floor the machine, HTTP and JSON set.
//
//	go build -o /tmp/parley ./cmd/parley
//	nice go run ./bench/admission -parley /tmp/parley -rate 500 -duration 10s -runs 3
//	nice go run ./bench/admission -parley /tmp/parley -rate 500 -replicas 2 -store postgres
//
// With -store postgres, serve stores in a throwaway PostgreSQL cluster (internal/pgtest: initdb in
// a temporary directory, durable as production runs it, stopped at the end); with -replicas 2, two
// serve processes share its database behind one admission Service. kube-proxy spreads a Service's
// connections, not its requests, and the API server keeps one HTTP/2 connection per replica it
// was sent to; so the load generator holds one connection to each replica and sends review i to
// replica i mod replicas (round robin per request): every replica sees the same share, as behind
// a Service whose API servers' connections landed on each. The allow-all side stays one process:
// it is the floor (what one review costs the machine, TLS, HTTP/2 and JSON), one process is the
// cheapest way to pay it, and a second would only add scheduling noise to the floor.
//
// Each run prints one markdown table row: per side the latency percentiles (counted from when each
// request was due, so a stalled server shows: no coordinated omission) and CPU per review, the
// ratios Parley / allow-all of p99 and CPU per review, the reviews parley serve answered unjudged
// (parley_admission_fail_open_total on its /metrics), errors, and each serve process's peak
// resident memory; with -runs N, a median row follows. Below the table, per run: serve's
// decisions against the mix sent, the load average and how late the load generator itself sent.
// Every run is checked: serve's decisions must be the mix's (HPA scales allowed, scale-downs
// denied, or warned in warn mode, ConfigMaps uncovered), every answer the one its write must get,
// nothing unjudged and no review unanswered; otherwise the run is printed WRONG and the program
// exits 1.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/parleyhq/parley/bench/internal/admissionrig"
	"github.com/parleyhq/parley/bench/internal/procstat"
	"github.com/parleyhq/parley/internal/busycluster"
	"github.com/parleyhq/parley/internal/fakegithub"
)

// allowAllEnv, set to a directory, makes this program the allow-all webhook instead (serving with
// the directory's certificate and token until SIGTERM): run re-executes itself with it, so that the
// allow-all side is a process of its own like parley serve, not goroutines of the load generator.
const allowAllEnv = "PARLEY_BENCH_ALLOW_ALL"

func main() {
	if dir := os.Getenv(allowAllEnv); dir != "" {
		if err := serveAllowAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, "admission (allow-all):", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.StringVar(&o.parley, "parley", "", "the parley binary to run (default: build ./cmd/parley into a temporary directory)")
	flag.IntVar(&o.rate, "rate", 500, "admission reviews per second, to each side")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of the load (at most 5m)")
	flag.StringVar(&o.mode, "mode", "deny", `the cluster's admission mode: "deny" or "warn"`)
	flag.DurationVar(&o.timeout, "timeout", 5*time.Second, "how long a review may take before it counts as an error (the chart's timeoutSeconds)")
	flag.StringVar(&o.logLevel, "log-level", "info", "parley serve's log_level (its default is info; its log goes to a file)")
	flag.IntVar(&o.runs, "runs", 1, "runs back to back, each with a fresh serve and repository; a median row follows the rows")
	flag.StringVar(&o.store, "store", "sqlite", `serve's store: "sqlite" (a file) or "postgres" (a throwaway PostgreSQL cluster)`)
	flag.IntVar(&o.replicas, "replicas", 1, "parley serve processes behind the admission Service (more than 1 needs -store postgres)")
	flag.Parse()
	os.Exit(runAll(o, os.Stdout, os.Stderr))
}

type options struct {
	parley            string
	rate              int
	duration, timeout time.Duration
	mode, logLevel    string
	runs, replicas    int
	store             string // "sqlite" or "postgres"
}

// maxReplicas bounds -replicas: each replica is a serve process on a machine the load generator
// shares.
const maxReplicas = 4

func (o options) check() error {
	switch {
	case o.rate < 1 || o.rate > 5000:
		return fmt.Errorf("-rate %d: want 1 to 5000 reviews a second", o.rate)
	case o.duration <= 0 || o.duration > 5*time.Minute:
		return fmt.Errorf("-duration %s: want more than 0 and at most 5m", o.duration)
	case int(o.duration.Seconds()*float64(o.rate)) < 1:
		return fmt.Errorf("-rate %d for -duration %s sends no review", o.rate, o.duration)
	case o.mode != "deny" && o.mode != "warn":
		return fmt.Errorf(`-mode %q: want "deny" or "warn"`, o.mode)
	case o.timeout <= 0 || o.timeout > 30*time.Second:
		return fmt.Errorf("-timeout %s: want more than 0 and at most 30s (the API server's limit)", o.timeout)
	case o.runs < 1 || o.runs > 20:
		return fmt.Errorf("-runs %d: want 1 to 20", o.runs)
	case o.store != "sqlite" && o.store != "postgres":
		return fmt.Errorf(`-store %q: want "sqlite" or "postgres"`, o.store)
	case o.replicas < 1 || o.replicas > maxReplicas:
		return fmt.Errorf("-replicas %d: want 1 to %d", o.replicas, maxReplicas)
	case o.replicas > 1 && o.store != "postgres":
		return fmt.Errorf("-replicas %d needs -store postgres: a SQLite store is one process's file, replicas share a PostgreSQL database", o.replicas)
	}
	return nil
}

// side is what one webhook answered.
type side struct {
	lat    []time.Duration // per review, from when it was due to its answer (or error), sorted
	errors int
	first  string // the first error, for the report
	proto  string // the protocol the answers came in
}

// result is one run.
type result struct {
	o                   options
	reviews             int
	parley, allowAll    side
	answers             []*admissionv1.AdmissionResponse // serve's answer to each review, nil where none came
	decisions           map[string]float64               // parley_admission_reviews_total during the load, by decision, over every replica
	unjudged            float64                          // parley_admission_fail_open_total during the load, over every replica
	want                map[busycluster.Write]int
	peakRSS             []int64 // KiB, each serve replica's VmHWM (start and warm-up included)
	cpu, allowAllCPU    float64 // seconds of CPU during the load (serve's summed over the replicas)
	postgresCPU         float64 // seconds of CPU PostgreSQL's processes used during the load; NaN on SQLite
	senderCPU           float64 // seconds of CPU this program used during the load
	lag                 []time.Duration
	loadBefore, loadEnd string
}

// run starts parley serve (-replicas of it, on -store) and the allow-all webhook, sends the load
// to both, and stops them. Progress goes to logw.
func run(o options, logw io.Writer) (*result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "parley-admission-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := o.parley
	if bin == "" {
		if bin, err = buildParley(dir, logw); err != nil {
			return nil, err
		}
	}

	// The busy repository, hosted by the fake GitHub with the App installed.
	fmt.Fprintln(logw, "building the busy repository ...")
	work, bare := filepath.Join(dir, "work"), filepath.Join(dir, "infra.git")
	if _, err := busycluster.Build(work); err != nil {
		return nil, err
	}
	if out, err := gitCmd("clone", "-q", "--bare", work, bare).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("git clone --bare: %w: %s", err, out)
	}
	gh, err := fakegithub.Start()
	if err != nil {
		return nil, fmt.Errorf("fake GitHub: %w", err)
	}
	defer gh.Close()
	appKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	gh.AppPublicKey, gh.AppID = &appKey.PublicKey, 99
	gh.SetInstallation("acme/infra", 5)
	gh.SetRepository("acme/infra", map[string]any{"clone_url": bare, "default_branch": "main"})

	// The TLS both webhooks serve, and the API server's token.
	pool, err := admissionrig.WriteTLS(dir)
	if err != nil {
		return nil, err
	}
	token := rand.Text()
	allowAddr := freePort()
	files := map[string]string{
		"admission-token": token + "\n",
		"app.pem":         string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(appKey)})),
		"allow-all.addr":  allowAddr,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return nil, err
		}
	}
	storeAt, postgresPID := filepath.Join(dir, "parley.db"), 0
	if o.store == "postgres" {
		fmt.Fprintln(logw, "starting PostgreSQL ...")
		dsn, pid, stop, err := startPostgres()
		if err != nil {
			return nil, err
		}
		defer stop(logw)
		storeAt, postgresPID = dsn, pid
	}

	// parley serve, each replica's log in a file as a container runtime would keep it. The
	// replicas start together, as a Deployment's pods do.
	replicas := make([]*serveReplica, o.replicas)
	for i := range replicas {
		r, err := startServe(bin, dir, i, storeAt, gh.URL+"/api/v3/", o, pool)
		if err != nil {
			return nil, err
		}
		defer r.stop()
		replicas[i] = r
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	allow := exec.Command(self)
	allow.Env = append(os.Environ(), allowAllEnv+"="+dir)
	allow.Stdout, allow.Stderr = logw, logw
	allowProc, err := start(allow)
	if err != nil {
		return nil, fmt.Errorf("start the allow-all webhook: %w", err)
	}
	defer allowProc.stop()

	fmt.Fprintln(logw, "waiting for parley serve's /readyz ...")
	for _, r := range replicas {
		if err := waitReady("http://"+r.ops+"/readyz", r.proc, time.Minute); err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", r.name, err, r.logTail())
		}
	}

	res := &result{o: o, reviews: int(o.duration.Seconds() * float64(o.rate)), want: map[busycluster.Write]int{}}
	allowURL := "https://" + allowAddr + "/admission/prod"
	allowClient := admissionrig.Client(pool, o.timeout)
	defer allowClient.CloseIdleConnections()
	// Warm up: the first review may come before serve has loaded the repository (it is loaded at
	// start, in the background); it is answered unjudged then. Review 0 is sent until it is judged,
	// which also opens each side's connection (one per replica), as the API server's stays open.
	fmt.Fprintln(logw, "warming up ...")
	for _, r := range replicas {
		if err := warmUp(r.client, r.url, token, r.proc, time.Minute); err != nil {
			return nil, fmt.Errorf("%s: %w\n%s", r.name, err, r.logTail())
		}
	}
	if err := warmUp(allowClient, allowURL, token, allowProc, 30*time.Second); err != nil {
		return nil, fmt.Errorf("the allow-all webhook: %w", err)
	}

	before := make([]scraped, len(replicas))
	cpu0 := make([]float64, len(replicas))
	for i, r := range replicas {
		if before[i], err = scrape("http://" + r.ops + "/metrics"); err != nil {
			return nil, err
		}
		cpu0[i] = procstat.CPUSeconds(r.cmd.Process.Pid)
	}
	acpu0, scpu0, pgcpu0 := procstat.CPUSeconds(allow.Process.Pid), procstat.CPUSeconds(os.Getpid()), math.NaN()
	if postgresPID != 0 {
		pgcpu0 = procstat.TreeCPUSeconds(postgresPID)
	}
	res.loadBefore = procstat.LoadAverage()
	fmt.Fprintf(logw, "sending %d reviews to each side at %d/s ...\n", res.reviews, o.rate)
	// Every review is encoded (and its UID read back) before the load, so the load generator
	// spends its CPU on sending.
	bodies, uids := make([][]byte, res.reviews), make([]types.UID, res.reviews)
	for i := range bodies {
		bodies[i] = busycluster.Review(i + 1)
		var rev admissionv1.AdmissionReview
		if err := json.Unmarshal(bodies[i], &rev); err != nil || rev.Request == nil {
			return nil, fmt.Errorf("review %d does not decode: %v", i+1, err)
		}
		uids[i] = rev.Request.UID
		res.want[busycluster.Mix(i+1)]++
	}
	res.parley.lat, res.allowAll.lat = make([]time.Duration, res.reviews), make([]time.Duration, res.reviews)
	res.answers = make([]*admissionv1.AdmissionResponse, res.reviews)
	res.lag = make([]time.Duration, res.reviews)
	perr, aerr := make([]error, res.reviews), make([]error, res.reviews)
	pproto, aproto := make([]string, res.reviews), make([]string, res.reviews)
	interval := time.Second / time.Duration(o.rate)
	sending := newSenders()
	begin := time.Now()
	for i, body := range bodies {
		due := begin.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		res.lag[i] = time.Since(due)
		r := replicas[i%len(replicas)] // round robin per request, one connection per replica
		sending.do(func() {
			a, err := admissionrig.Send(r.client, r.url, token, body, uids[i], due)
			res.parley.lat[i], pproto[i], res.answers[i], perr[i] = a.Latency, a.Proto, a.Response, err
		})
		sending.do(func() {
			a, err := admissionrig.Send(allowClient, allowURL, token, body, uids[i], due)
			res.allowAll.lat[i], aproto[i], aerr[i] = a.Latency, a.Proto, err
		})
	}
	sending.wait()
	for i, r := range replicas {
		res.cpu += procstat.CPUSeconds(r.cmd.Process.Pid) - cpu0[i]
	}
	res.allowAllCPU, res.senderCPU, res.postgresCPU = procstat.CPUSeconds(allow.Process.Pid)-acpu0, procstat.CPUSeconds(os.Getpid())-scpu0, math.NaN()
	if postgresPID != 0 {
		res.postgresCPU = procstat.TreeCPUSeconds(postgresPID) - pgcpu0
	}
	res.loadEnd = procstat.LoadAverage()
	res.decisions = map[string]float64{}
	for i, r := range replicas {
		res.peakRSS = append(res.peakRSS, procstat.Status(r.cmd.Process.Pid, "VmHWM:"))
		after, err := scrape("http://" + r.ops + "/metrics")
		if err != nil {
			return nil, err
		}
		for _, dec := range []string{"allowed", "denied", "warned", "uncovered", "gitops", "skipped", "fail-open", "rejected"} {
			if d := after.sum("parley_admission_reviews_total", "decision", dec) - before[i].sum("parley_admission_reviews_total", "decision", dec); d != 0 {
				res.decisions[dec] += d
			}
		}
		res.unjudged += after.sum("parley_admission_fail_open_total", "", "") - before[i].sum("parley_admission_fail_open_total", "", "")
	}
	res.parley.settle(perr, pproto)
	res.allowAll.settle(aerr, aproto)
	slices.Sort(res.lag)
	return res, nil
}

// buildParley builds ./cmd/parley into dir.
func buildParley(dir string, logw io.Writer) (string, error) {
	bin := filepath.Join(dir, "parley")
	fmt.Fprintln(logw, "building parley ...")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/parleyhq/parley/cmd/parley").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/parley: %w\n%s", err, out)
	}
	return bin, nil
}

// settle counts the errors and sorts the latencies.
func (s *side) settle(errs []error, protos []string) {
	for i, err := range errs {
		if err != nil {
			s.errors++
			if s.first == "" {
				s.first = err.Error()
			}
		} else if s.proto == "" {
			s.proto = protos[i]
		}
	}
	slices.Sort(s.lat)
}

// warmUp sends review 0 until it is judged (answered without the fail-open warning).
func warmUp(c *http.Client, url, token string, p *proc, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		if gone, err := p.exited(); gone {
			return fmt.Errorf("exited during the warm-up: %v", err)
		}
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(busycluster.Review(0)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err == nil {
			var rev admissionv1.AdmissionReview
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode != http.StatusOK:
				err = fmt.Errorf("warm-up review answered %s: %s", resp.Status, admissionrig.Tail(string(b), 200))
			case json.Unmarshal(b, &rev) != nil || rev.Response == nil:
				err = fmt.Errorf("warm-up review answered no AdmissionReview: %s", admissionrig.Tail(string(b), 200))
			case slices.ContainsFunc(rev.Response.Warnings, func(w string) bool { return strings.Contains(w, "could not judge") }):
				err = fmt.Errorf("warm-up review answered unjudged: %v", rev.Response.Warnings)
			default:
				return nil
			}
		}
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("no review judged within %s: %v", within, last)
}

// scraped is the counters of one scrape of /metrics.
type scraped []*model.Sample

// scrape reads the Prometheus text exposition at url.
func scrape(url string) (scraped, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	var out scraped
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			if m.GetCounter() == nil {
				continue
			}
			s := &model.Sample{Metric: model.Metric{model.MetricNameLabel: model.LabelValue(name)}, Value: model.SampleValue(m.GetCounter().GetValue())}
			for _, l := range m.GetLabel() {
				s.Metric[model.LabelName(l.GetName())] = model.LabelValue(l.GetValue())
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// sum adds the counter name's series whose label has value (every series when label is "").
func (s scraped) sum(name, label, value string) float64 {
	var total float64
	for _, x := range s {
		if string(x.Metric[model.MetricNameLabel]) == name && (label == "" || string(x.Metric[model.LabelName(label)]) == value) {
			total += float64(x.Value)
		}
	}
	return total
}

// serveAllowAll is the allow-all webhook: the API server's token checked, the review decoded,
// answered allowed. It serves dir's certificate at the address in dir/allow-all.addr until SIGTERM.
func serveAllowAll(dir string) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	addr, err := os.ReadFile(filepath.Join(dir, "allow-all.addr"))
	if err != nil {
		return err
	}
	tok, err := os.ReadFile(filepath.Join(dir, "admission-token"))
	if err != nil {
		return err
	}
	token := []byte(strings.TrimSpace(string(tok)))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /admission/prod", func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(got), token) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var rev admissionv1.AdmissionReview
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 3<<20)).Decode(&rev); err != nil || rev.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{Kind: "AdmissionReview", APIVersion: "admission.k8s.io/v1"},
			Response: &admissionv1.AdmissionResponse{UID: rev.Request.UID, Allowed: true}})
	})
	ln, err := net.Listen("tcp", string(addr))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 35 * time.Second,
		IdleTimeout: 2 * time.Minute, TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")) }() // owned here: ends with Shutdown below
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// proc is a started process, waited for by a goroutine that start owns and stop collects.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited, with Wait's error in err
	err  error
}

func start(cmd *exec.Cmd) (*proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// exited says whether the process has ended, and how.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM (parley serve drains), and SIGKILL if the process is not gone in 30 s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func waitReady(url string, p *proc, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if gone, err := p.exited(); gone {
			return fmt.Errorf("exited before it was ready: %v", err)
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer 200 within %s", url, within)
}

func gitCmd(args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	return cmd
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// pct is the nearest-rank percentile p (0 to 100) of sorted latencies.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func ms(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.0f ms", float64(d.Milliseconds()))
}
