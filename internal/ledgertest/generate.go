// Package ledgertest generates synthetic infrastructure repositories for the ledger's tests and
// benchmarks: many commits, each carrying Parley trailers and changing one field of one manifest.
//
// Repositories are written with `git fast-import`, which builds 100,000 commits in seconds, so the
// git command must be on PATH.
package ledgertest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// GeneratorVersion changes whenever Generate would write a different repository for the same
// Params, so that caches keyed by Params.Key are invalidated.
const GeneratorVersion = 1

// Params shape a generated repository.
type Params struct {
	Commits int    // commits on Branch, including the first one that adds every file
	Extra   int    // commits on ExtraBranch, on top of Branch's tip (for incremental updates)
	Apps    int    // Kubernetes apps (a Deployment and an HPA each, one file per app)
	Modules int    // Terraform modules (one main.tf each)
	Seed    uint64 // the random stream
	// Branch and ExtraBranch name the two branches; defaults "main" and "next".
	Branch, ExtraBranch string
}

func (p Params) withDefaults() Params {
	if p.Apps <= 0 {
		p.Apps = 40
	}
	if p.Modules <= 0 {
		p.Modules = 10
	}
	if p.Commits <= 0 {
		p.Commits = 1
	}
	if p.Branch == "" {
		p.Branch = "main"
	}
	if p.ExtraBranch == "" {
		p.ExtraBranch = "next"
	}
	return p
}

// Key names the repository these parameters generate, for caching it on disk.
func (p Params) Key() string {
	p = p.withDefaults()
	return fmt.Sprintf("v%d-c%d-x%d-a%d-m%d-s%d-%s-%s", GeneratorVersion, p.Commits, p.Extra, p.Apps, p.Modules,
		p.Seed, p.Branch, p.ExtraBranch)
}

// Start is the author time of the first generated commit; each next commit is a few minutes later.
var start = time.Date(2025, 1, 6, 9, 0, 0, 0, time.UTC)

// Generate creates a new repository in dir (which must not exist or be empty) and fills it with
// the history p describes. The result is deterministic for given Params and git version.
func Generate(ctx context.Context, dir string, p Params) error {
	p = p.withDefaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("generate %s: %w", dir, err)
	}
	git := func(stdin io.Reader, args ...string) error {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		cmd.Stdin = stdin
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("generate %s: git %s: %w: %s", dir, strings.Join(args, " "), err, stderr.String())
		}
		return nil
	}
	if err := git(nil, "init", "--quiet", "--initial-branch="+p.Branch); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		bw := bufio.NewWriterSize(pw, 1<<20)
		err := writeStream(bw, p)
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
		done <- err
	}()
	err := git(pr, "fast-import", "--quiet", "--done")
	// Unblock the writer if fast-import died early, then wait for it: it must not outlive us.
	_ = pr.CloseWithError(io.ErrClosedPipe)
	if werr := <-done; err == nil && werr != nil && werr != io.ErrClosedPipe {
		err = fmt.Errorf("generate %s: write stream: %w", dir, werr)
	}
	if err != nil {
		return err
	}
	return git(nil, "reset", "--quiet", "--hard", p.Branch)
}

// state is the generated repository's current content.
type state struct {
	rng      *rand.Rand
	apps     []app
	modules  []module
	mark     int
	when     time.Time
	branch   string
	lastMark int
}

type app struct {
	name, ns string
	replicas int
	image    int // image tag minor version
	cpu      int // millicores
	memory   int // Mi
	minR     int
	maxR     int
}

type module struct {
	dir      string
	min, max int
	desired  int
	thresh   int
	periods  int
}

var authors = []struct{ name, email, intent, motivation string }{
	{"Alice Martin", "alice@parley.example", "availability", "incident INC-%d severity=high"},
	{"Bob Chen", "bob@parley.example", "reliability", "traffic"},
	{"Cost Optimizer", "cost-optimizer@parley.example", "cost", "budget"},
	{"Security Scanner", "scanner@parley.example", "security", "cve CVE-2026-%d severity=critical"},
	{"Dana Platform", "dana@parley.example", "consistency", "maintenance"},
}

func writeStream(w *bufio.Writer, p Params) error {
	s := &state{rng: rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15)), when: start, branch: p.Branch}
	for i := range p.Apps {
		s.apps = append(s.apps, app{name: fmt.Sprintf("svc%03d", i), ns: []string{"prod", "staging"}[i%2],
			replicas: 2 + i%5, image: 1, cpu: 250, memory: 256, minR: 2, maxR: 20})
	}
	for i := range p.Modules {
		s.modules = append(s.modules, module{dir: fmt.Sprintf("infra/mod%02d", i), min: 2, max: 16, desired: 4,
			thresh: 1000, periods: 3})
	}
	// The first commit adds every file.
	files := map[string][]byte{}
	for i := range s.apps {
		files[s.appPath(i)] = s.appYAML(i)
	}
	for i := range s.modules {
		files[s.modPath(i)] = s.modTF(i)
	}
	s.commitAs(w, "Dana Platform", "dana@parley.example", "Initial infrastructure\n\nIntent: baseline\n", files)
	for n := 1; n < p.Commits; n++ {
		s.step(w, n)
	}
	if p.Extra > 0 {
		s.branch = p.ExtraBranch
		for n := p.Commits; n < p.Commits+p.Extra; n++ {
			s.step(w, n)
		}
	}
	_, err := w.WriteString("done\n")
	return err
}

func (s *state) appPath(i int) string {
	return fmt.Sprintf("k8s/%s/%s.yaml", s.apps[i].ns, s.apps[i].name)
}
func (s *state) modPath(i int) string { return s.modules[i].dir + "/main.tf" }

func (s *state) appYAML(i int) []byte {
	a := s.apps[i]
	return fmt.Appendf(nil, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: %[2]s
  labels:
    app: %[1]s
spec:
  replicas: %[3]d
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      containers:
        - name: app
          image: registry.example.com/%[1]s:1.%[4]d.0
          resources:
            requests:
              cpu: %[5]dm
              memory: %[6]dMi
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: %[1]s
  namespace: %[2]s
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: %[1]s
  minReplicas: %[7]d
  maxReplicas: %[8]d
`, a.name, a.ns, a.replicas, a.image, a.cpu, a.memory, a.minR, a.maxR)
}

func (s *state) modTF(i int) []byte {
	m := s.modules[i]
	return fmt.Appendf(nil, `resource "aws_autoscaling_group" "consumer" {
  name             = "consumer-%[1]d"
  min_size         = %[2]d
  max_size         = %[3]d
  desired_capacity = %[4]d

  tag {
    key                 = "team"
    value               = "streaming"
    propagate_at_launch = true
  }
}

resource "aws_cloudwatch_metric_alarm" "consumer_lag" {
  alarm_name          = "consumer-lag-%[1]d"
  comparison_operator = "GreaterThanThreshold"
  evaluation_periods  = %[6]d
  metric_name         = "SumOffsetLag"
  namespace           = "AWS/Kafka"
  period              = 60
  statistic           = "Maximum"
  threshold           = %[5]d
  alarm_actions       = [aws_autoscaling_policy.scale_out.arn]
}
`, i, m.min, m.max, m.desired, m.thresh, m.periods)
}

// step writes commit n: one field of one file changes, with trailers from one of the authors.
func (s *state) step(w *bufio.Writer, n int) {
	au := authors[s.rng.IntN(len(authors))]
	mot := au.motivation
	if strings.Contains(mot, "%d") {
		mot = fmt.Sprintf(mot, 1000+n%9000)
	}
	var subject, claim string
	files := map[string][]byte{}
	if s.rng.IntN(4) == 0 && len(s.modules) > 0 {
		i := s.rng.IntN(len(s.modules))
		m := &s.modules[i]
		switch s.rng.IntN(3) {
		case 0:
			m.desired = m.min + s.rng.IntN(m.max-m.min+1)
			subject = fmt.Sprintf("%s: desired capacity %d", m.dir, m.desired)
			claim = fmt.Sprintf("tf:%s//aws_autoscaling_group.consumer#/desired_capacity", m.dir)
		case 1:
			m.thresh = 500 + 100*s.rng.IntN(20)
			subject = fmt.Sprintf("%s: lag threshold %d", m.dir, m.thresh)
		default:
			m.periods = 1 + s.rng.IntN(5)
			subject = fmt.Sprintf("%s: %d evaluation periods", m.dir, m.periods)
		}
		files[s.modPath(i)] = s.modTF(i)
	} else {
		i := s.rng.IntN(len(s.apps))
		a := &s.apps[i]
		switch s.rng.IntN(4) {
		case 0, 1:
			a.replicas = 1 + s.rng.IntN(12)
			subject = fmt.Sprintf("%s/%s: %d replicas", a.ns, a.name, a.replicas)
			claim = fmt.Sprintf("k8s:apps/Deployment/%s/%s#/spec/replicas", a.ns, a.name)
		case 2:
			a.image++
			subject = fmt.Sprintf("%s/%s: image 1.%d.0", a.ns, a.name, a.image)
		default:
			a.cpu = 100 + 50*s.rng.IntN(10)
			a.memory = 128 * (1 + s.rng.IntN(8))
			subject = fmt.Sprintf("%s/%s: requests %dm/%dMi", a.ns, a.name, a.cpu, a.memory)
		}
		files[s.appPath(i)] = s.appYAML(i)
	}
	msg := fmt.Sprintf("%s\n\nGenerated change %d.\n\nIntent: %s\nMotivation: %s\n", subject, n, au.intent, mot)
	if claim != "" && s.rng.IntN(3) == 0 {
		msg += "Claim: " + claim + "\n"
	}
	msg += fmt.Sprintf("Signed-off-by: %s <%s>\n", au.name, au.email)
	s.commitAs(w, au.name, au.email, msg, files)
}

func (s *state) commitAs(w *bufio.Writer, name, email, msg string, files map[string][]byte) {
	s.mark++
	fmt.Fprintf(w, "commit refs/heads/%s\nmark :%d\n", s.branch, s.mark)
	fmt.Fprintf(w, "author %s <%s> %d +0000\n", name, email, s.when.Unix())
	fmt.Fprintf(w, "committer %s <%s> %d +0000\n", name, email, s.when.Unix())
	fmt.Fprintf(w, "data %d\n%s\n", len(msg), msg)
	if s.lastMark > 0 {
		fmt.Fprintf(w, "from :%d\n", s.lastMark)
	}
	for _, path := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n", path, len(files[path]))
		w.Write(files[path])
		w.WriteByte('\n')
	}
	w.WriteByte('\n')
	s.lastMark = s.mark
	s.when = s.when.Add(time.Duration(1+s.rng.IntN(9)) * time.Minute)
}

// Cached returns the path of a repository generated with p under cacheDir, generating it first
// if no complete copy exists. A repository is generated into a temporary sibling and renamed into
// place, so an interrupted generation never leaves a half-written cache entry.
func Cached(ctx context.Context, cacheDir string, p Params) (string, error) {
	dir := filepath.Join(cacheDir, p.Key())
	if _, err := os.Stat(filepath.Join(dir, ".git", "HEAD")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("cache %s: %w", cacheDir, err)
	}
	tmp, err := os.MkdirTemp(cacheDir, p.Key()+".tmp-")
	if err != nil {
		return "", fmt.Errorf("cache %s: %w", cacheDir, err)
	}
	if err := Generate(ctx, tmp, p); err != nil {
		_ = os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("cache %s: %w", dir, err)
	}
	return dir, nil
}
