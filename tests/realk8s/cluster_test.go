package realk8s

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// Versions and cache layout written by scripts/real-controllers.sh; keep the two in step.
const (
	kubernetesVersion          = "v1.36.3"
	etcdVersion                = "v3.6.8"
	kustomizeControllerVersion = "v1.9.4"
	helmControllerVersion      = "v1.6.0"
	sourceControllerVersion    = "v1.9.0"
)

// Tokens of the static token file. The HPA's user is the service account the real
// kube-controller-manager uses for the horizontal-pod-autoscaler controller when it runs with
// --use-service-account-credentials, which is what Parley must name as the actor.
const (
	adminToken = "parley-e2e-admin"
	hpaToken   = "parley-e2e-hpa"
	hpaUser    = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
)

// binaries are the cached artifacts the test runs.
type binaries struct {
	etcd, apiserver, kustomizeController, helmController, crdDir string
}

// findBinaries locates the artifacts in the cache. A missing artifact fails the test: skipping
// would let CI report green without having run anything.
func findBinaries(t *testing.T) binaries {
	t.Helper()
	b := cachedBinaries(t)
	b.require(t, b.etcd, b.apiserver, b.kustomizeController, b.helmController, b.crdDir)
	return b
}

// cacheDir is where scripts/real-controllers.sh keeps what it builds.
func cacheDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("PARLEY_CACHE")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatalf("no PARLEY_CACHE and no home directory to find the cache in: %v", err)
		}
		base = filepath.Join(home, ".cache", "parley")
	}
	return filepath.Join(base, "real-controllers")
}

// cachedBinaries is where the artifacts are in the cache, present or not.
func cachedBinaries(t *testing.T) binaries {
	t.Helper()
	dir := cacheDir(t)
	return binaries{
		etcd:                filepath.Join(dir, "etcd-"+etcdVersion, "etcd"),
		apiserver:           filepath.Join(dir, "kube-apiserver-"+kubernetesVersion, "kube-apiserver"),
		kustomizeController: filepath.Join(dir, "kustomize-controller-"+kustomizeControllerVersion, "kustomize-controller"),
		helmController:      filepath.Join(dir, "helm-controller-"+helmControllerVersion, "helm-controller"),
		crdDir: filepath.Join(dir, "crds-kustomize-controller-"+kustomizeControllerVersion+"-helm-controller-"+helmControllerVersion+
			"-source-controller-"+sourceControllerVersion),
	}
}

// require fails the test unless every path exists.
func (b binaries) require(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s is missing (%v): run scripts/real-controllers.sh first", p, err)
		}
	}
}

// freePort returns a port that was free a moment ago. The binaries take ports as flags, so there
// is a small window in which another process could take it; on a test machine that is rare enough.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// process is a started subprocess whose output goes to a log file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // set before done is closed
}

// start runs a binary with its output in dir/<name>.log and registers a cleanup that stops it
// (SIGTERM, then SIGKILL after 10s) and, if the test failed, prints the end of its log.
func start(t *testing.T, dir, name string, env []string, bin string, args ...string) *process {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("%s: create log: %v", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("%s: start %s: %v", name, bin, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", logPath, tail(logPath, 40))
		}
	})
	return p
}

func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited reports an error if the process is no longer running: waiting on a dead apiserver
// until a deadline only hides why.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v; last lines of %s:\n%s", p.name, p.err, p.log, tail(p.log, 40))
	default:
		return nil
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// auditSink is the audit webhook backend's target: it keeps every EventList body it receives.
type auditSink struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (s *auditSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, b)
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *auditSink) all() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}

// auditPolicy records writes to Deployments and their scale subresource with request and
// response, the level Parley's decoder reads values from, and nothing else: the control plane's
// own lease and status traffic would only slow the webhook down.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: RequestResponse
  verbs: [create, update, patch]
  resources:
  - group: apps
    resources: [deployments, deployments/scale]
- level: None
`

// cluster is a running etcd + kube-apiserver.
type cluster struct {
	host      string // https://127.0.0.1:<port>
	dir       string
	apiserver *process
	audit     *auditSink
}

// config returns a client configuration authenticating with token and sending userAgent.
// The serving certificate is the apiserver's self-signed one, so it is not verified.
func (c *cluster) config(token, userAgent string) *rest.Config {
	return &rest.Config{
		Host:            c.host,
		BearerToken:     token,
		UserAgent:       userAgent,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             50,
		Burst:           100,
	}
}

// kubeconfig writes a kubeconfig for the admin user, for kustomize-controller.
func (c *cluster) kubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(c.dir, "admin.kubeconfig")
	writeFile(t, path, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: e2e
  context: {cluster: e2e, user: admin}
current-context: e2e
`, c.host, adminToken))
	return path
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// startCluster starts etcd and kube-apiserver with static tokens and the audit webhook backend
// pointed at an in-test server, and waits until /readyz answers ok.
func startCluster(t *testing.T, bins binaries) *cluster {
	t.Helper()
	return startClusterWith(t, bins, clusterOptions{})
}

// startClusterWithPolicy is startCluster with the given audit policy.
func startClusterWithPolicy(t *testing.T, bins binaries, auditPolicy string) *cluster {
	t.Helper()
	return startClusterWith(t, bins, clusterOptions{auditPolicy: auditPolicy})
}

// clusterOptions change what startClusterWith starts.
type clusterOptions struct {
	// auditPolicy replaces the harness's own audit policy.
	auditPolicy string
	// auditURL and auditToken send the audit events to Parley instead of the in-test sink.
	auditURL, auditToken string
	// tokens are more lines of the static token file (token,user,uid,"groups").
	tokens string
	// args are more kube-apiserver flags.
	args []string
}

func startClusterWith(t *testing.T, bins binaries, opt clusterOptions) *cluster {
	t.Helper()
	dir := t.TempDir()
	c := &cluster{dir: dir, audit: &auditSink{}}

	auditURL := opt.auditURL
	if auditURL == "" {
		auditSrv := httptest.NewServer(c.audit)
		t.Cleanup(auditSrv.Close)
		auditURL = auditSrv.URL
	}

	// etcd
	etcdPort, peerPort := freePort(t), freePort(t)
	etcd := start(t, dir, "etcd", nil, bins.etcd,
		"-data-dir", filepath.Join(dir, "etcd"), "-client-port", fmt.Sprint(etcdPort), "-peer-port", fmt.Sprint(peerPort))
	waitFor(t, 60*time.Second, "etcd to serve clients", func() (bool, error) {
		if err := etcd.exited(); err != nil {
			return false, err
		}
		b, err := os.ReadFile(etcd.log)
		return bytes.Contains(b, []byte("ready\n")), err
	})

	// Service account keys: the apiserver refuses to start without them.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("generate service account key: %v", err)
	}
	keyPath := filepath.Join(dir, "sa.key")
	writeFile(t, keyPath, string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})))

	tokens := filepath.Join(dir, "tokens.csv")
	writeFile(t, tokens, fmt.Sprintf("%s,admin,admin,system:masters\n%s,%s,hpa,\"system:serviceaccounts,system:serviceaccounts:kube-system,system:masters\"\n",
		adminToken, hpaToken, hpaUser)+opt.tokens)
	policy := filepath.Join(dir, "audit-policy.yaml")
	if opt.auditPolicy == "" {
		opt.auditPolicy = auditPolicy
	}
	writeFile(t, policy, opt.auditPolicy)
	webhook := filepath.Join(dir, "audit-webhook.kubeconfig")
	writeFile(t, webhook, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: audit
  cluster: {server: %s, insecure-skip-tls-verify: true}
users:
- name: apiserver
  user: {token: %q}
contexts:
- name: audit
  context: {cluster: audit, user: apiserver}
current-context: audit
`, auditURL, opt.auditToken))

	port := freePort(t)
	c.host = fmt.Sprintf("https://127.0.0.1:%d", port)
	c.apiserver = start(t, dir, "kube-apiserver", nil, bins.apiserver, append([]string{
		"--etcd-servers=http://127.0.0.1:" + fmt.Sprint(etcdPort),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + fmt.Sprint(port),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--token-auth-file=" + tokens,
		"--service-account-key-file=" + keyPath,
		"--service-account-signing-key-file=" + keyPath,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/12",
		"--disable-admission-plugins=ServiceAccount",
		"--audit-policy-file=" + policy,
		"--audit-webhook-config-file=" + webhook,
		"--audit-webhook-mode=batch",
		"--audit-webhook-batch-max-wait=1s",
		"--audit-webhook-initial-backoff=1s",
		"--profiling=false",
	}, opt.args...)...)

	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	waitFor(t, 120*time.Second, "kube-apiserver /readyz", func() (bool, error) {
		if err := c.apiserver.exited(); err != nil {
			return false, err
		}
		req, _ := http.NewRequest(http.MethodGet, c.host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := hc.Do(req)
		if err != nil {
			return false, nil // not listening yet
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(b)) == "ok", nil
	})
	return c
}

// waitFor polls cond every 200ms until it returns true. An error wrapping errRetry (see notYet)
// only says why the condition is not true yet and is reported if the deadline passes; any other
// error fails the test at once, as does the deadline, naming what was awaited.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond()
		switch {
		case errors.Is(err, errRetry):
			last = err
		case err != nil:
			t.Fatalf("waiting for %s: %v", what, err)
		case ok:
			return
		}
		select {
		case <-ctx.Done():
			if last != nil {
				t.Fatalf("timed out after %s waiting for %s; last: %v", timeout, what, last)
			}
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// errRetry marks a condition error that only says why the condition is not true yet.
var errRetry = errors.New("not yet")

func notYet(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errRetry, fmt.Sprintf(format, args...))
}
