package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/internal/pgtest"
	"github.com/parleyhq/parley/internal/sqldb"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// serveProc is one running `parley serve`.
type serveProc struct {
	cmd  *exec.Cmd
	url  string
	logs *lockedBuffer
}

// lockedBuffer is the process's stderr, written by exec's copier while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// startServe starts `parley serve` with env added to the test's environment and waits until it
// answers /readyz.
func startServe(t *testing.T, bin string, env ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), env...)
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if i := strings.Index(logs.String(), `"addr":"`); i >= 0 {
			addr := logs.String()[i+8:]
			addr = addr[:strings.IndexByte(addr, '"')]
			if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return &serveProc{cmd: cmd, url: "http://" + addr, logs: logs}
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("parley serve did not become ready:\n%s", logs.String())
	return nil
}

// TestServeReplicasShareOnePostgreSQL runs two, then three `parley serve` replicas on one real
// PostgreSQL against the fake GitHub and a real repository, sends them a burst of pull request
// and drift deliveries spread across the replicas, SIGKILLs one replica mid-burst (what was sent to
// it afterwards GitHub and the audit backend send again, to another), and checks that no delivery
// is lost, each pull request has one check run and one sticky comment, each drift verdict one gate
// commit, and the on-call yield's expiry timer fired once.
func TestServeReplicasShareOnePostgreSQL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and several parley serve processes")
	}
	bin := buildParley(t)
	for _, replicas := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d replicas", replicas), func(t *testing.T) { replicaBurst(t, bin, replicas) })
	}
}

func replicaBurst(t *testing.T, bin string, replicas int) {
	const prs, batches, secret, auditToken = 12, 6, "replica-webhook-secret", "audit-token"
	dsn := pgtest.DSN(t)
	gh := fakegithub.New(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	gh.AppPublicKey, gh.AppID = &key.PublicKey, 31337
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}

	// The demo repository, hosted as acme/infra, with a pull request per capacity proposal.
	work := filepath.Join(t.TempDir(), "work")
	if _, err := demo.Build(work); err != nil {
		t.Fatal(err)
	}
	w := gittest.New(t, work).As("Cost Bot", "cost-optimizer@parley.example")
	tf, err := os.ReadFile(filepath.Join(work, "infra/kafka/main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	capacity := regexp.MustCompile(`desired_capacity\s*=\s*\d+`)
	if !capacity.Match(tf) {
		t.Fatal("the demo's kafka module has no desired_capacity")
	}
	heads := map[int]string{}
	for n := 1; n <= prs; n++ {
		w.Run("checkout", "-q", "-b", fmt.Sprintf("pr%d", n), "main")
		if err := os.WriteFile(filepath.Join(work, "infra/kafka/main.tf"), capacity.ReplaceAll(tf, fmt.Appendf(nil, "desired_capacity = %d", 4+n)), 0o644); err != nil {
			t.Fatal(err)
		}
		w.Run("commit", "-q", "-am", fmt.Sprintf("Capacity %d\n\nIntent: cost\nMotivation: budget\n", 4+n))
		heads[n] = w.Run("rev-parse", "HEAD")
	}
	w.Run("checkout", "-q", "main")
	bare := filepath.Join(t.TempDir(), "infra.git")
	w.Run("clone", "-q", "--bare", work, bare)
	remote := gittest.New(t, bare)
	for n := 1; n <= prs; n++ {
		remote.Run("update-ref", fmt.Sprintf("refs/pull/%d/head", n), heads[n])
	}
	base := remote.Run("rev-parse", "main")
	gh.SetInstallation("acme/infra", 5)
	gh.SetRepository("acme/infra", map[string]any{"clone_url": bare, "default_branch": "main"})

	procs := make([]*serveProc, replicas)
	for i := range procs {
		procs[i] = startServe(t, bin, "PARLEY_APP_ID=31337", "PARLEY_PRIVATE_KEY_FILE="+keyFile, "PARLEY_WEBHOOK_SECRETS="+secret,
			"PARLEY_LISTEN=127.0.0.1:0", "PARLEY_STORE="+dsn, "PARLEY_DATA_DIR="+t.TempDir(), "PARLEY_GITHUB_URL="+gh.URL+"/api/v3/",
			"PARLEY_WORKERS=2", "PARLEY_LEASE=15s", "PARLEY_SHUTDOWN_GRACE=10s", "PARLEY_KUBE_AUDIT_TOKEN="+auditToken,
			"PARLEY_WRITE_MODE=direct", "PARLEY_GITOPS_REPOSITORY=acme/infra")
	}

	// The burst: each pull request delivered twice (opened, then an edit), and audit batches that
	// each report the demo's drift again under new audit IDs, made now, the on-call yield ending
	// 25 seconds later.
	type delivery struct {
		path, kind, id string
		body           []byte
	}
	audit, err := os.ReadFile("../../examples/drift/k8s-audit.json")
	if err != nil {
		t.Fatal(err)
	}
	audit = regexp.MustCompile(`2026-11-20T\d\d:\d\d:\d\d`).ReplaceAll(audit, []byte(time.Now().UTC().Format("2006-01-02T15:04:05")))
	audit = bytes.ReplaceAll(audit, []byte(`"parley.dev/expires": "2h"`), []byte(`"parley.dev/expires": "25s"`))
	// A pull request's two deliveries are neighbours, so that they reach two replicas at the same
	// moment; a drift batch follows every other pull request.
	var burst []delivery
	for n := 1; n <= prs; n++ {
		for i, action := range []string{"opened", "edited"} {
			body := prPayload(t, bare, base, heads[n], n)
			if action != "opened" {
				if !bytes.Contains(body, []byte(`"action":"opened"`)) {
					t.Fatal("the pull_request example's action is not where the test edits it")
				}
				body = bytes.Replace(body, []byte(`"action":"opened"`), []byte(`"action":"`+action+`"`), 1)
			}
			burst = append(burst, delivery{"/webhooks/github", "pull_request", fmt.Sprintf("00000000-0000-4000-8000-%06d%06d", n, i), body})
		}
		if b := n / 2; n%2 == 0 && b <= batches {
			body := bytes.ReplaceAll(audit, []byte(`"auditID": "`), fmt.Appendf(nil, `"auditID": "b%d-`, b))
			burst = append(burst, delivery{"/events/k8s-audit", "", "", body})
		}
	}
	post := func(url string, d delivery) int {
		req, _ := http.NewRequest(http.MethodPost, url+d.path, bytes.NewReader(d.body))
		req.Header.Set("Content-Type", "application/json")
		if d.kind != "" {
			mac := hmac.New(sha256.New, []byte(secret))
			mac.Write(d.body)
			req.Header.Set("X-GitHub-Event", d.kind)
			req.Header.Set("X-GitHub-Delivery", d.id)
			req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		} else {
			req.Header.Set("Authorization", "Bearer "+auditToken)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	killed := 0
	alive := func(i int) *serveProc {
		p := procs[i%replicas]
		if p == nil {
			p = procs[(killed+1)%replicas]
		}
		return p
	}
	// Waves of deliveries posted at once, delivery i to replica i mod replicas; a delivery a
	// replica did not acknowledge is sent again to another, as GitHub's redelivery and the audit
	// backend's retry would.
	const wave = 6
	for start := 0; start < len(burst); start += wave {
		if start == len(burst)/2/wave*wave {
			// Mid-burst, with the first half's deliveries in flight, the first replica dies.
			procs[killed].cmd.Process.Signal(syscall.SIGKILL)
			procs[killed].cmd.Wait()
			procs[killed] = nil
		}
		var wg sync.WaitGroup
		for i := start; i < min(start+wave, len(burst)); i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for try := 0; ; try++ {
					if code := post(alive(i+try).url, burst[i]); code == http.StatusAccepted || code == http.StatusOK {
						return
					} else if try == replicas {
						t.Errorf("delivery %d: answered %d by every replica", i, code)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	if t.Failed() {
		t.FailNow()
	}

	// Wait for the queue to drain and the yield's timer to fire.
	ctx := context.Background()
	_, db, err := sqldb.OpenPostgres(ctx, dsn, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	resumed := "parley: resume Git's /spec/template/spec/containers/0/image of Deployment prod/web"
	var pending, dead, done int
	deadline := time.Now().Add(120 * time.Second)
	for {
		if err := db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE state = 0), count(*) FILTER (WHERE state = 2), count(*) FILTER (WHERE state = 1) FROM deliveries`).
			Scan(&pending, &dead, &done); err != nil {
			t.Fatal(err)
		}
		if pending == 0 && strings.Contains(remote.Run("log", "--format=%s", base+"..main"), resumed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 120 s: %d deliveries pending, %d done, %d dead; main since the burst:\n%s", pending, done, dead, remote.Run("log", "--format=%s", base+"..main"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A second firing, if a replica were to make one, would come as soon as it saw the timer due:
	// give the others time to look before counting.
	time.Sleep(5 * time.Second)

	if want := 2*prs + batches; done != want || dead != 0 {
		t.Errorf("deliveries: %d done, %d dead; want all %d done", done, dead, want)
	}
	for n := 1; n <= prs; n++ {
		if c := gh.Comments(fmt.Sprintf("acme/infra#%d", n)); len(c) != 1 {
			t.Errorf("pull request %d has %d sticky comments, want 1", n, len(c))
		}
	}
	perHead := map[string]int{}
	for _, r := range gh.CheckRuns("acme/infra") {
		perHead[r.HeadSHA]++
	}
	for n, h := range heads {
		if perHead[h] != 1 {
			t.Errorf("pull request %d: %d check runs for its head, want 1", n, perHead[h])
		}
	}
	subjects := map[string]int{}
	for _, s := range strings.Split(remote.Run("log", "--format=%s", base+"..main"), "\n") {
		subjects[s]++
	}
	for _, want := range []string{
		"parley: yield /spec/template/spec/containers/0/image of Deployment prod/web to oncall",
		"parley: yield /spec/replicas of Deployment prod/web to hpa",
		resumed,
	} {
		if subjects[want] != 1 {
			t.Errorf("%q landed %d times, want once; main since the burst: %v", want, subjects[want], subjects)
		}
	}
	if len(subjects) != 3 {
		t.Errorf("main since the burst: %v; want the two yields and the resume only", subjects)
	}

	takeovers := 0
	for _, p := range procs {
		if p == nil {
			continue
		}
		resp, err := http.Get(p.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		var m bytes.Buffer
		m.ReadFrom(resp.Body)
		resp.Body.Close()
		if !strings.Contains(m.String(), "parley_queue_lease_takeovers_total") || !strings.Contains(m.String(), "parley_delivery_queue_depth") {
			t.Errorf("a replica's /metrics lacks the queue depth or the lease takeovers:\n%s", m.String())
		}
		var n int
		if _, err := fmt.Sscanf(metricLine(m.String(), "parley_queue_lease_takeovers_total"), "%d", &n); err == nil {
			takeovers += n
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("a replica exited with %v after SIGTERM:\n%s", err, p.logs.String())
		}
	}
	t.Logf("%d replicas: %d deliveries done; %d leases of the killed replica taken over", replicas, done, takeovers)
}

// metricLine returns the value of the first sample of metric in a Prometheus text exposition.
func metricLine(exposition, metric string) string {
	for _, line := range strings.Split(exposition, "\n") {
		if rest, ok := strings.CutPrefix(line, metric+" "); ok {
			return rest
		}
	}
	return ""
}
