package chart

import (
	"archive/tar"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/parleyhq/parley/app/report"
	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/internal/npmdata"
	"github.com/parleyhq/parley/scripts/ship/imagespec"
)

// TestInstallDay is docs/install.md done as a platform team does it, on real parts: the commands
// are read out of the document and run as written, against the fake GitHub (built from GitHub's
// OpenAPI description) in github.com's place.
//
//  1. `./scripts/image` builds the image; its file system is unpacked and its own binary runs
//     everything below.
//  2. `parley app create` registers the App through the manifest flow (GitHub's
//     POST /app-manifests/{code}/conversions) and writes its credentials to ./parley-app.
//  3. `kubectl create secret ... --from-file=./parley-app` and `helm install ... --set ...`: the
//     chart is rendered with the Helm SDK with those values, and its Deployment is run as a
//     kubelet would: the container's env (secretKeyRef resolved from that Secret), command and
//     args, its volumes mounted where it says inside the image's root (chroot), as the image's
//     user, with the container's memory limit where the cgroup shows it.
//  4. `parley init`, the policy pushed to the default branch, the App installed on the repository;
//     `kubectl exec ... -- parley doctor` in the same container: every check ok, exit 0.
//  5. The document's first-verdict commands open a pull request; GitHub's signed pull_request
//     delivery to serve yields the `parley` check run and exactly one verdict comment.
//
// What it differs in, and why: github.url is the fake's (where a GitHub Enterprise Server's would
// go), and the container's ports are free ports of the host's loopback, which stands for the
// pod's network namespace.
//
// The seams it closes: every PARLEY_ variable the chart renders must be one serve reads (the
// environment column of the image's `parley serve --help`, which app/config's
// TestHelpListsExactlyWhatLoadReads keeps equal to what serve reads; serve also warns of any
// other at start; a configuration file serve is given refuses unknown keys itself); every path
// the env names lies in a mounted volume; and a memory limit under the render budgets fails the
// chart's rendering, or else doctor's memory check against the container's limit. The detached
// checkout of a pull request job is cmd/parley's TestReviewInPullRequestCheckout.
func TestInstallDay(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image is a linux image")
	}
	if os.Geteuid() != 0 {
		// chroot needs root; without it the binary would see the test machine's files instead of
		// the image's and the mounts', and nothing would show a path pointing elsewhere.
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs as root so that the install test runs: running the image's file system needs root (chroot)")
		}
		t.Skip("running the image's file system needs root (chroot)")
	}
	doc := readInstallDoc(t)
	root := imageRoot(t)
	gh := fakegithub.New(t)
	apiURL := gh.URL + "/api/v3/"
	user := t.TempDir() // the user's machine: where the commands run
	host := &machine{bin: filepath.Join(root, "usr", "local", "bin", "parley"), dir: user,
		env: []string{"PATH=/usr/bin:/bin", "HOME=" + user, "PARLEY_GITHUB_URL=" + apiURL}}

	// Step 1: register the App with the manifest flow.
	create := doc.command(t, "parley app create ")
	out, code := host.appCreate(t, create)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s", strings.Join(create, " "), code, out)
	}
	t.Logf("parley app create:\n%s", out)

	// Step 2: the Secret, as kubectl creates it from the directory.
	secrets := map[string]map[string][]byte{}
	name, data := kubectlSecret(t, doc.line(t, "kubectl -n parley create secret generic "), user)
	secrets[name] = data

	// Step 3: helm install, rendered with the document's release, namespace and --set values.
	install := doc.line(t, "helm install ")
	rel, vals := helmInstall(t, install, user)
	// The one value the document does not give: the fake's address, set where a GitHub Enterprise
	// Server's goes (the document says so for github.url).
	if err := strvals.ParseInto("github.url="+apiURL, vals); err != nil {
		t.Fatal(err)
	}
	rendered, err := renderRelease(rel, vals)
	if err != nil {
		t.Fatalf("%s: %v", install, err)
	}
	pod := newPod(t, root, rendered, secrets)
	pod.checkEnvIsServes(t, host)
	serve := pod.start(t)
	if l := serve.logs.String(); strings.Contains(l, "no setting of parley serve") {
		t.Errorf("serve warns of a variable the chart sets that it does not read:\n%s", l)
	}
	// Step 3's check: the document's `kubectl exec ... -- parley version` names the chart's version.
	if !strings.Contains(strings.Join(doc, "\n"), "`kubectl -n parley exec deploy/parley -- parley version`") {
		t.Fatal("docs/install.md no longer checks the install with parley version: update this test")
	}
	shipped, err := imagespec.ReadChart(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if out, code := pod.exec(t, "version"); code != 0 || !strings.Contains(out, shipped.AppVersion) {
		t.Errorf("parley version in the pod: exit %d, does not name %s:\n%s", code, shipped.AppVersion, out)
	}

	// Step 4: a repository with a policy from `parley init`, on its default branch, the App
	// installed on it.
	repo := newRepository(t, gh, host, doc)
	doctor := doc.command(t, "kubectl -n parley exec deploy/parley -- parley doctor")
	out, code = pod.exec(t, doctor...)
	t.Logf("parley %s:\n%s", strings.Join(doctor, " "), out)
	if code != 0 {
		t.Fatalf("parley doctor: exit %d", code)
	}
	checks := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(l, "ok ") {
			t.Errorf("doctor: not ok: %s", l)
		}
		checks++
	}
	if checks < 5 {
		t.Errorf("doctor printed %d checks", checks)
	}
	for _, c := range []string{"ok    memory", "ok    app ", "ok    webhook", "ok    installation acme", "ok    policy acme/infra"} {
		if !strings.Contains(out, c) {
			t.Errorf("doctor's output lacks %q", c)
		}
	}

	// Step 5: the first verdict.
	head := repo.firstVerdict(t, doc)
	base := repo.git(t, "rev-parse", "origin/main")
	// Opening the pull request: GitHub keeps its head at refs/pull/1/head, which serve fetches.
	gittest.New(t, repo.bare).Run("update-ref", "refs/pull/1/head", head)
	gh.SetCommit("acme/infra", head, fakegithub.Commit{AuthorLogin: "alice", CommitterLogin: "alice", Verified: true})
	body, err := npmdata.PatchedWebhookExample("pull_request", "opened", func(ev map[string]any) {
		ev["number"] = 1
		ev["installation"] = map[string]any{"id": installationID, "node_id": "x"}
		r := ev["repository"].(map[string]any)
		r["full_name"], r["name"], r["clone_url"], r["default_branch"] = "acme/infra", "infra", repo.url, "main"
		r["owner"].(map[string]any)["login"] = "acme"
		pr := ev["pull_request"].(map[string]any)
		pr["number"] = 1
		pr["head"].(map[string]any)["sha"], pr["head"].(map[string]any)["ref"] = head, "scale-web"
		pr["base"].(map[string]any)["sha"], pr["base"].(map[string]any)["ref"] = base, "main"
		pr["user"].(map[string]any)["login"] = "alice"
	})
	if err != nil {
		npmdata.FatalOrSkip(t, err)
	}
	secret, _, _ := strings.Cut(string(secrets["parley-github-app"]["webhook-secrets"]), ",")
	if status := deliver(t, serve.url+"/webhooks/github", "pull_request", body, strings.TrimSpace(secret)); status != http.StatusAccepted {
		t.Fatalf("GitHub's delivery answered %d\n%s", status, serve.logs.String())
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(gh.Comments("acme/infra#1")) == 0 || !checkRunDone(gh, head) {
		if time.Now().After(deadline) {
			t.Fatalf("no verdict within a minute; GitHub calls %v\n%s", gh.Calls(), serve.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c := gh.Comments("acme/infra#1"); len(c) != 1 {
		t.Errorf("%d comments on the pull request, want the one sticky verdict comment", len(c))
	} else if doc, err := report.Extract(c[0].Body); err != nil || len(doc.Verdicts) == 0 || !strings.Contains(c[0].Body, "replicas") {
		t.Errorf("the comment carries no verdict on the replicas (%v):\n%s", err, c[0].Body)
	}
	var runs []fakegithub.CheckRun
	for _, r := range gh.CheckRuns("acme/infra") {
		if r.HeadSHA == head {
			runs = append(runs, r)
		}
	}
	if len(runs) != 1 || runs[0].Name != "parley" || runs[0].Conclusion == "" {
		t.Errorf("check runs for the head: %+v", runs)
	}
	t.Logf("check run %q: %s, %s", runs[0].Name, runs[0].Conclusion, runs[0].Title)
}

// TestReadmeInstallIsTheDoc: the README's install commands are docs/install.md's, which
// TestInstallDay runs: every command line of its block is a command line of the document.
func TestReadmeInstallIsTheDoc(t *testing.T) {
	doc := readInstallDoc(t)
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	commands := map[string]bool{}
	for _, l := range doc {
		commands[stripComment(l)] = true
	}
	block := installDoc(strings.Split(string(readme), "\n")).block(t, "parley app create ")
	for _, l := range block {
		if c := stripComment(l); c != "" && !commands[c] {
			t.Errorf("README.md's install block runs %q, which docs/install.md does not", c)
		}
	}
	if len(block) < 5 {
		t.Errorf("README.md's install block has %d lines", len(block))
	}
}

func stripComment(l string) string {
	if c := strings.Index(l, "#"); c >= 0 && (c == 0 || l[c-1] == ' ') {
		l = l[:c]
	}
	return strings.TrimSpace(l)
}

func checkRunDone(gh *fakegithub.Server, head string) bool {
	for _, r := range gh.CheckRuns("acme/infra") {
		if r.HeadSHA == head && r.Status == "completed" {
			return true
		}
	}
	return false
}

// installationID is the installation the fake gives acme/infra.
const installationID = 42

// installDoc is docs/install.md, whose commands the test runs.
type installDoc []string

func readInstallDoc(t *testing.T) installDoc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}

// lines are the document's lines starting with prefix, each with its comment dropped and its
// continuation lines joined.
func (d installDoc) lines(prefix string) []string {
	var out []string
	for i := 0; i < len(d); i++ {
		if !strings.HasPrefix(d[i], prefix) {
			continue
		}
		l := d[i]
		for strings.HasSuffix(strings.TrimSpace(l), `\`) && i+1 < len(d) {
			i++
			l = strings.TrimSuffix(strings.TrimSpace(l), `\`) + " " + strings.TrimSpace(d[i])
		}
		if c := strings.Index(l, " #"); c >= 0 {
			l = l[:c]
		}
		out = append(out, strings.TrimSpace(l))
	}
	return out
}

func (d installDoc) line(t *testing.T, prefix string) string {
	t.Helper()
	l := d.lines(prefix)
	if len(l) == 0 {
		t.Fatalf("docs/install.md has no line starting %q: the test runs what the document says", prefix)
	}
	return l[0]
}

// command is the parley arguments of the document's line starting with prefix: what follows
// "parley" (what comes before it, an environment or kubectl exec, is the test's to provide).
func (d installDoc) command(t *testing.T, prefix string) []string {
	t.Helper()
	f := strings.Fields(d.line(t, prefix))
	if i := slices.Index(f, "--"); i >= 0 { // kubectl exec ... -- parley ...
		f = f[i+1:]
	}
	for len(f) > 0 && strings.Contains(f[0], "=") { // VAR=value parley ...
		f = f[1:]
	}
	if len(f) == 0 || f[0] != "parley" {
		t.Fatalf("docs/install.md's %q runs no parley", prefix)
	}
	return f[1:]
}

// block is the fenced block of the document holding a line that starts with first.
func (d installDoc) block(t *testing.T, first string) []string {
	t.Helper()
	for i, l := range d {
		if !strings.HasPrefix(l, first) {
			continue
		}
		start, end := i, i
		for start > 0 && !strings.HasPrefix(d[start-1], "```") {
			start--
		}
		for end < len(d) && !strings.HasPrefix(d[end], "```") {
			end++
		}
		return d[start:end]
	}
	t.Fatalf("docs/install.md has no block with a line starting %q", first)
	return nil
}

// imageRoot builds the image with ./scripts/image for this machine's architecture, as the
// document's step 0 does (into a temporary layout rather than the checkout's dist/), and unpacks
// its file system. Go's build cache makes a rebuild of an unchanged commit a link.
func imageRoot(t *testing.T) string {
	t.Helper()
	lay := t.TempDir()
	cmd := exec.Command(filepath.Join("scripts", "image"), "--platform", "linux/"+runtime.GOARCH, "--layout", lay)
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("./scripts/image: %v\n%s", err, out)
	}
	p, err := layout.FromPath(lay)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	// The layout holds the tagged index; the index holds this platform's image.
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("layout %s: %v %+v", lay, err, im)
	}
	inner, err := idx.ImageIndex(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := inner.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("the image index: %v %+v", err, m)
	}
	img, err := inner.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := unpackImage(img, root); err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	imageConfigs.Store(root, cfg.Config)
	return root
}

// imageConfigs keeps each unpacked root's image config (entrypoint, user, working directory).
var imageConfigs sync.Map

// unpackImage writes the image's file system below root with its owners and modes.
func unpackImage(img v1.Image, root string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !filepath.IsLocal(h.Name) {
			return fmt.Errorf("layer entry %q leaves the root", h.Name)
		}
		path := filepath.Join(root, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o700)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(path, b, 0o600)
			}
		default:
			err = fmt.Errorf("layer entry %q has type %q", h.Name, h.Typeflag)
		}
		if err == nil {
			err = os.Lchown(path, h.Uid, h.Gid)
		}
		if err == nil {
			err = syscall.Chmod(path, uint32(h.Mode)) // keeps /tmp's sticky bit
		}
		if err != nil {
			return err
		}
	}
}

// machine runs the image's binary on the user's machine (not in the container).
type machine struct {
	bin, dir string
	env      []string
}

// setupOpen is where parley app create prints the address to open.
var setupOpen = regexp.MustCompile(`Open (http://\S+) in a browser`)

// appCreate runs `parley app create` and does what the user's browser does with the address it
// prints: open it, submit its form to GitHub, follow GitHub's redirect back with the code.
func (m *machine) appCreate(t *testing.T, args []string) (string, int) {
	t.Helper()
	cmd := exec.Command(m.bin, args...)
	cmd.Dir, cmd.Env = m.dir, m.env
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var setupURL string
	for deadline := time.Now().Add(30 * time.Second); setupURL == ""; time.Sleep(10 * time.Millisecond) {
		if s := setupOpen.FindStringSubmatch(out.String()); s != nil {
			setupURL = s[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("app create printed no address:\n%s", out.String())
		}
	}
	if code, back, err := fakegithub.RegisterThroughSetup(http.DefaultClient, setupURL); err != nil {
		t.Fatal(err)
	} else if code != http.StatusOK {
		t.Fatalf("back from GitHub: %d\n%s", code, back)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), 0
}

// run runs the binary with args and returns its combined output and exit code.
func (m *machine) run(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(m.bin, args...)
	cmd.Dir, cmd.Env = dir, m.env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// kubectlSecret is the Secret `kubectl create secret generic NAME --from-file=DIR` makes: a key
// per regular file of DIR.
func kubectlSecret(t *testing.T, line, dir string) (string, map[string][]byte) {
	t.Helper()
	f := strings.Fields(line)
	i := slices.Index(f, "generic")
	if i < 0 || i+2 >= len(f) {
		t.Fatalf("cannot read %q", line)
	}
	name, data := f[i+1], map[string][]byte{}
	for _, a := range f[i+2:] {
		from, ok := strings.CutPrefix(a, "--from-file=")
		if !ok || strings.Contains(from, "=") {
			t.Fatalf("%q: the test knows --from-file=DIR only, not %q", line, a)
		}
		ents, err := os.ReadDir(filepath.Join(dir, from))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		for _, e := range ents {
			if e.Type().IsRegular() {
				b, err := os.ReadFile(filepath.Join(dir, from, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				data[e.Name()] = b
			}
		}
	}
	return name, data
}

// release is a helm install's release name and namespace.
type release struct{ name, namespace string }

// helmInstall reads `helm install NAME charts/parley -n NS --set K=V ...` as Helm does, with
// $(cat FILE) replaced by the file's content as the shell would.
func helmInstall(t *testing.T, line, dir string) (release, map[string]any) {
	t.Helper()
	cat := regexp.MustCompile(`\$\(cat ([^)]+)\)`)
	line = cat.ReplaceAllStringFunc(line, func(s string) string {
		b, err := os.ReadFile(filepath.Join(dir, cat.FindStringSubmatch(s)[1]))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return strings.TrimSpace(string(b))
	})
	f := strings.Fields(line)
	if len(f) < 4 || f[0] != "helm" || f[1] != "install" || f[3] != "charts/parley" {
		t.Fatalf("cannot read %q", line)
	}
	rel, vals := release{name: f[2], namespace: "default"}, map[string]any{}
	for i := 4; i < len(f); i++ {
		switch {
		case (f[i] == "-n" || f[i] == "--namespace") && i+1 < len(f):
			i++
			rel.namespace = f[i]
		case f[i] == "--set" && i+1 < len(f):
			i++
			if err := strvals.ParseInto(f[i], vals); err != nil {
				t.Fatalf("%s: --set %s: %v", line, f[i], err)
			}
		default:
			t.Fatalf("%q: the test does not know %q", line, f[i])
		}
	}
	return rel, vals
}

func renderRelease(rel release, vals map[string]any) (map[string]string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: rel.name, Namespace: rel.namespace, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, rv)
}

// The rendered Deployment, as much of it as a kubelet needs here.
type deployment struct {
	Kind     string
	Metadata struct{ Name string }
	Spec     struct {
		Template struct {
			Spec struct {
				SecurityContext struct {
					RunAsUser, RunAsGroup, FSGroup *int64
				} `json:"securityContext"`
				Containers []container
				Volumes    []struct {
					Name      string
					EmptyDir  *struct{}                    `json:"emptyDir"`
					PVC       *struct{ ClaimName string }  `json:"persistentVolumeClaim"`
					Secret    *struct{ SecretName string } `json:"secret"`
					ConfigMap *struct{ Name string }       `json:"configMap"`
				}
			}
		}
	}
}

type container struct {
	Image   string
	Command []string
	Args    []string
	Env     []struct {
		Name      string
		Value     *string
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name, Key string
				Optional  bool
			} `json:"secretKeyRef"`
		} `json:"valueFrom"`
	}
	Ports []struct {
		Name          string
		ContainerPort int `json:"containerPort"`
	}
	ReadinessProbe struct {
		HTTPGet struct{ Path, Port string } `json:"httpGet"`
	} `json:"readinessProbe"`
	Resources struct {
		Limits struct{ Memory string }
	}
	VolumeMounts []struct {
		Name      string
		MountPath string `json:"mountPath"`
		SubPath   string `json:"subPath"`
	} `json:"volumeMounts"`
}

// pod is the rendered Deployment's container made to run from the image's root.
type pod struct {
	root              string
	argv              []string
	env               []string
	uid, gid, fsGroup int64
	dir               string
	// ports maps each container port to the host port standing for it: the test shares the host's
	// network namespace, where another program may hold 8080.
	ports            map[string]int
	probe, probePort string
}

func newPod(t *testing.T, root string, rendered map[string]string, secrets map[string]map[string][]byte) *pod {
	t.Helper()
	var dep deployment
	var configMaps = map[string]map[string]string{}
	for name, doc := range rendered {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, d := range strings.Split(doc, "\n---") {
			var head struct {
				Kind     string
				Metadata struct{ Name string }
				Data     map[string]string
			}
			if yaml.Unmarshal([]byte(d), &head) != nil {
				continue
			}
			switch head.Kind {
			case "Deployment":
				if err := yaml.Unmarshal([]byte(d), &dep); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			case "ConfigMap":
				configMaps[head.Metadata.Name] = head.Data
			}
		}
	}
	if dep.Kind != "Deployment" || len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("the chart rendered no Deployment of one container: %+v", dep)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	v, _ := imageConfigs.Load(root)
	img := v.(v1.Config)
	p := &pod{root: root, dir: img.WorkingDir, ports: map[string]int{}}
	if p.dir == "" {
		p.dir = "/"
	}
	// The kubelet's rule: runAsUser and runAsGroup override the image's user (uid:gid), and the
	// fsGroup is a supplementary group owning the volumes.
	sc := dep.Spec.Template.Spec.SecurityContext
	u, g, _ := strings.Cut(img.User, ":")
	uid, errU := strconv.ParseInt(u, 10, 64)
	gid, errG := strconv.ParseInt(g, 10, 64)
	if sc.RunAsUser != nil {
		uid, errU = *sc.RunAsUser, nil
	}
	if sc.RunAsGroup != nil {
		gid, errG = *sc.RunAsGroup, nil
	}
	if errU != nil || errG != nil || uid == 0 || sc.FSGroup == nil {
		t.Fatalf("the pod's user: image %q, securityContext %+v: want a numeric non-root user and an fsGroup", img.User, sc)
	}
	p.uid, p.gid, p.fsGroup = uid, gid, *sc.FSGroup

	// The kubelet's rule: command replaces the image's entrypoint, args its cmd.
	p.argv = img.Entrypoint
	if len(c.Command) > 0 {
		p.argv = c.Command
	}
	if len(c.Args) > 0 || len(c.Command) > 0 {
		p.argv = append(slices.Clone(p.argv), c.Args...)
	} else {
		p.argv = append(slices.Clone(p.argv), img.Cmd...)
	}

	// The container's ports, each given a free host port.
	hostPort := map[int]int{}
	for _, port := range c.Ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		hostPort[port.ContainerPort] = ln.Addr().(*net.TCPAddr).Port
		p.ports[port.Name] = hostPort[port.ContainerPort]
		ln.Close()
	}
	if p.ports[c.ReadinessProbe.HTTPGet.Port] == 0 {
		t.Fatalf("the readiness probe's port %q is no container port", c.ReadinessProbe.HTTPGet.Port)
	}
	p.probe, p.probePort = c.ReadinessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Port

	// The environment: the image's, then the container's, secretKeyRefs resolved from the Secrets
	// the document creates. A listen address on a container port is moved to its host port.
	p.env = slices.Clone(img.Env)
	listen := regexp.MustCompile(`^(0\.0\.0\.0)?:(\d+)$`)
	for _, e := range c.Env {
		switch {
		case e.Value != nil:
			val := *e.Value
			if m := listen.FindStringSubmatch(val); m != nil {
				n, _ := strconv.Atoi(m[2])
				if hostPort[n] == 0 {
					t.Errorf("env %s listens on %s, which the container does not declare as a port", e.Name, val)
				}
				val = fmt.Sprintf("127.0.0.1:%d", hostPort[n])
			}
			p.env = append(p.env, e.Name+"="+val)
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			data, ok := secrets[ref.Name][ref.Key]
			if !ok && !ref.Optional {
				t.Fatalf("env %s reads key %q of Secret %q, which docs/install.md's Secret does not have (it has %v)", e.Name, ref.Key, ref.Name, slices.Sorted(maps.Keys(secrets[ref.Name])))
			}
			if ok {
				p.env = append(p.env, e.Name+"="+string(data))
			}
		default:
			t.Fatalf("env %s: the test knows value and secretKeyRef only", e.Name)
		}
	}

	// The volumes, mounted where the container says inside the image's root, owned by the pod's
	// fsGroup as Kubernetes makes them.
	type volume struct {
		files map[string][]byte // nil: an empty, writable directory
	}
	vols := map[string]volume{}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		switch {
		case v.EmptyDir != nil, v.PVC != nil:
			vols[v.Name] = volume{}
		case v.Secret != nil:
			data, ok := secrets[v.Secret.SecretName]
			if !ok {
				t.Fatalf("volume %s mounts Secret %q, which docs/install.md does not create", v.Name, v.Secret.SecretName)
			}
			vols[v.Name] = volume{files: data}
		case v.ConfigMap != nil:
			data, ok := configMaps[v.ConfigMap.Name]
			if !ok {
				t.Fatalf("volume %s mounts ConfigMap %q, which the chart does not render", v.Name, v.ConfigMap.Name)
			}
			files := map[string][]byte{}
			for k, s := range data {
				files[k] = []byte(s)
			}
			vols[v.Name] = volume{files: files}
		default:
			t.Fatalf("volume %s: the test knows emptyDir, persistentVolumeClaim, secret and configMap only", v.Name)
		}
	}
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok || m.SubPath != "" || !filepath.IsAbs(m.MountPath) {
			t.Fatalf("volume mount %+v: no such volume, or a subPath the test does not know", m)
		}
		dir := filepath.Join(root, m.MountPath)
		// A mount hides what the image has there.
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// An empty volume is the group's to write (fsGroup, setgid); Secrets and ConfigMaps are
		// read-only; /tmp is everyone's, sticky, as the image has it.
		mode := uint32(0o2775)
		for name, b := range v.files {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o444); err != nil {
				t.Fatal(err)
			}
			mode = 0o755
		}
		if m.MountPath == "/tmp" {
			mode = 0o1777
		}
		if err := os.Chown(dir, 0, int(p.fsGroup)); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
	}

	// A path the container is told to use lies in one of its volumes: anywhere else it would be
	// the image's own file system, read-only to its user and lost with the container.
	for _, kv := range p.env {
		name, val, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "PARLEY_") {
			continue
		}
		for _, item := range strings.Split(val, ",") {
			path := item
			if _, after, ok := strings.Cut(item, "="); ok {
				path = after // NAME=/path lists, as PARLEY_CLUSTER_EVENT_SECRET_FILES
			}
			if !strings.HasPrefix(path, "/") {
				continue
			}
			inVolume := false
			for _, m := range c.VolumeMounts {
				inVolume = inVolume || path == m.MountPath || strings.HasPrefix(path, m.MountPath+"/")
			}
			if !inVolume {
				t.Errorf("env %s names %s, which is in no volume the container mounts", name, path)
			}
		}
	}

	// The container's memory limit, where the container sees it: its cgroup's memory.max.
	if c.Resources.Limits.Memory == "" {
		t.Fatal("the container has no memory limit")
	}
	q, err := resource.ParseQuantity(c.Resources.Limits.Memory)
	if err != nil {
		t.Fatalf("resources.limits.memory %q: %v", c.Resources.Limits.Memory, err)
	}
	cg := filepath.Join(root, "sys", "fs", "cgroup")
	if err := os.MkdirAll(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cg, "memory.max"), []byte(fmt.Sprintf("%d\n", q.Value())), 0o444); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkEnvIsServes fails for a PARLEY_ variable the chart renders that serve does not read: serve
// ignores unknown variables, so such a variable would configure nothing. What serve reads is the
// environment column of the image's own `parley serve --help`.
func (p *pod) checkEnvIsServes(t *testing.T, m *machine) {
	t.Helper()
	help, code := m.run(t, m.dir, "serve", "--help")
	if code != 0 {
		t.Fatalf("parley serve --help: exit %d\n%s", code, help)
	}
	read := map[string]bool{}
	col := -1
	for _, l := range strings.Split(help, "\n") {
		if i, j := strings.Index(l, "ENVIRONMENT"), strings.Index(l, "DEFAULT"); i >= 0 && j > i && col < 0 {
			col = i
			continue
		}
		if col >= 0 && len(l) > col {
			if f := strings.Fields(l[col:]); len(f) > 0 && strings.HasPrefix(f[0], "PARLEY_") {
				read[f[0]] = true
			}
		}
	}
	if len(read) < 10 {
		t.Fatalf("parley serve --help lists %d environment variables; cannot read its table:\n%s", len(read), help)
	}
	for _, kv := range p.env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PARLEY_") && !read[name] {
			t.Errorf("the chart sets %s, which parley serve does not read (not in parley serve --help)", name)
		}
	}
}

// command is the container's process, or another in the same container (kubectl exec).
func (p *pod) command(args ...string) *exec.Cmd {
	return &exec.Cmd{Path: args[0], Args: args, Dir: p.dir, Env: p.env,
		SysProcAttr: &syscall.SysProcAttr{Chroot: p.root, Credential: &syscall.Credential{Uid: uint32(p.uid), Gid: uint32(p.gid), Groups: []uint32{uint32(p.fsGroup)}}}}
}

// exec is `kubectl exec deploy/parley -- parley ARGS`.
func (p *pod) exec(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := p.command(append([]string{p.argv[0]}, args...)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

type running struct {
	url  string
	logs *lockedBuffer
}

// start runs the container's process and waits for its readiness probe.
func (p *pod) start(t *testing.T) running {
	t.Helper()
	cmd := p.command(p.argv...)
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %q in the image: %v", p.argv, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	probe := fmt.Sprintf("http://127.0.0.1:%d%s", p.ports[p.probePort], p.probe)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("%q exited: %v\n%s", p.argv, err, logs.String())
		default:
		}
		if resp, err := http.Get(probe); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered 200\n%s", probe, logs.String())
		}
	}
	return running{url: fmt.Sprintf("http://127.0.0.1:%d", p.ports["http"]), logs: logs}
}

// repository is the infrastructure repository: a working clone on the user's machine whose origin
// is served over Git's smart HTTP (serve clones it from clone_url).
type repository struct {
	dir, bare, url string
	env            []string
}

func (r *repository) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = r.dir, r.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepository makes acme/infra with a Deployment, adds the policy with the document's commands
// (`parley init`, `parley policy check`, committed and pushed to the default branch) and installs
// the App on it with the permissions and events app.yml asks for.
func newRepository(t *testing.T, gh *fakegithub.Server, m *machine, doc installDoc) *repository {
	t.Helper()
	bare := filepath.Join(t.TempDir(), "infra.git")
	gittest.New(t, filepath.Dir(bare)).Run("init", "-q", "--bare", "-b", "main", bare)
	r := &repository{dir: filepath.Join(m.dir, "infra"), bare: bare, url: gittest.ServeHTTP(t, bare, true),
		env: append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=Alice",
			"GIT_AUTHOR_EMAIL=alice@acme.example", "GIT_COMMITTER_NAME=Alice", "GIT_COMMITTER_EMAIL=alice@acme.example")}
	if err := os.MkdirAll(filepath.Join(r.dir, "apps", "web"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.git(t, "init", "-q", "-b", "main")
	r.git(t, "remote", "add", "origin", r.url)
	deployment := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: prod\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n"
	if err := os.WriteFile(filepath.Join(r.dir, "apps", "web", "deployment.yaml"), []byte(deployment), 0o644); err != nil {
		t.Fatal(err)
	}
	r.git(t, "add", "-A")
	r.git(t, "commit", "-q", "-m", "The web Deployment")
	r.git(t, "push", "-q", "origin", "main")
	// The document's policy block, with the image's parley first on PATH.
	r.run(t, doc.block(t, "parley init"), "PATH="+filepath.Dir(m.bin)+":"+os.Getenv("PATH"))
	if out := r.git(t, "ls-tree", "-r", "--name-only", "origin/main"); !strings.Contains(out, ".parley/policy.hcl") {
		t.Fatalf("the document's commands left no policy on the default branch: %s", out)
	}

	// Installing the App on the repository, GitHub's side of it.
	gh.SetRepository("acme/infra", map[string]any{"default_branch": "main", "clone_url": r.url})
	for _, f := range strings.Fields(r.git(t, "ls-files")) {
		b, err := os.ReadFile(filepath.Join(r.dir, f))
		if err != nil {
			t.Fatal(err)
		}
		gh.SetContent("acme/infra", "main", f, b)
	}
	gh.SetInstallation("acme/infra", installationID)
	gh.SetGrants(installationID, fakegithub.Grants{
		Permissions: map[string]string{"checks": "write", "contents": "write", "members": "read", "metadata": "read", "pull_requests": "write"},
		Events:      []string{"check_run", "check_suite", "issue_comment", "pull_request", "pull_request_review", "push"},
	})
	return r
}

// firstVerdict runs the document's first-verdict block in the working clone and returns the
// pushed head.
func (r *repository) firstVerdict(t *testing.T, doc installDoc) string {
	t.Helper()
	r.run(t, doc.block(t, "git switch -c "))
	if !strings.Contains(r.git(t, "show", "HEAD:apps/web/deployment.yaml"), "replicas: 6") {
		t.Fatal("the document's change did not change the replicas")
	}
	return r.git(t, "rev-parse", "HEAD")
}

// run runs a block of the document's shell commands in the working clone.
func (r *repository) run(t *testing.T, block []string, env ...string) {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", strings.Join(block, "\n"))
	cmd.Dir, cmd.Env = r.dir, append(slices.Clone(r.env), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docs/install.md's commands:\n%s\n%v\n%s", strings.Join(block, "\n"), err, out)
	}
}

// deliver posts body as GitHub does, signed with the App's webhook secret.
func deliver(t *testing.T, url, event string, body []byte, secret string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", "00000000-0000-4000-8000-000000000001")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
