package main

// The admission side of the attack benchmark: parley serve judges the busy cluster's admission
// reviews (internal/busycluster: the demo repository and 1,000 Deployments behind the fake
// GitHub) on its own TLS listener while the attacks run, so that the report shows what the
// attacks cost the writes a cluster waits on: admission p99, reviews answered unjudged (fail
// open) and answers that differ from what the policy decides on a quiet machine.

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/parleyhq/parley/bench/internal/admissionrig"
	"github.com/parleyhq/parley/internal/busycluster"
	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/internal/npmdata"
)

// cluster is what every run shares: the busy repository, hosted by the fake GitHub with the App
// installed, and the App's key.
type cluster struct {
	gh     *fakegithub.Server
	appKey *rsa.PrivateKey
	// deepHead is the head of pull request #1, which adds deepTFFile (the deeptf attack), and
	// pullRequest GitHub's pull_request delivery of it.
	deepHead    string
	pullRequest []byte
}

// deepTFFile is where the deeptf attack's pull request adds 170,000 nested blocks (1.0 MB, as deep
// as issue 34's 200,000 and within the 1 MiB of HCL Parley parses, so the nesting check, not the
// size, refuses it), next
// to the demo's Kafka Terraform: issue 34's file that ended parley review with Go's fatal stack
// overflow before the nesting was checked ahead of the parser.
const deepTFFile = "infra/kafka/deep.tf"

// newCluster builds the busy repository once, in dir, and serves it from the fake GitHub.
func newCluster(dir string) (*cluster, error) {
	work, bare := filepath.Join(dir, "work"), filepath.Join(dir, "infra.git")
	if _, err := busycluster.Build(work); err != nil {
		return nil, err
	}
	clone := exec.Command("git", "clone", "-q", "--bare", work, bare)
	clone.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := clone.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("git clone --bare: %w: %s", err, out)
	}
	deepHead, err := pushDeepTF(work, bare)
	if err != nil {
		return nil, err
	}
	pr, err := npmdata.PatchedWebhookExample("pull_request", "synchronize", func(ev map[string]any) {
		ev["number"] = 1
		ev["installation"] = map[string]any{"id": 5, "node_id": "x"}
		r := ev["repository"].(map[string]any)
		r["full_name"], r["name"], r["clone_url"], r["default_branch"] = "acme/infra", "infra", bare, "main"
		r["owner"].(map[string]any)["login"] = "acme"
		p := ev["pull_request"].(map[string]any)
		p["number"] = 1
		p["head"].(map[string]any)["sha"], p["head"].(map[string]any)["ref"] = deepHead, "deep"
		p["base"].(map[string]any)["ref"] = "main"
		p["user"].(map[string]any)["login"] = "mallory"
	})
	if err != nil {
		return nil, fmt.Errorf("GitHub's pull_request example (npm data: ./scripts/fetch-testdata.sh): %w", err)
	}
	gh, err := fakegithub.Start()
	if err != nil {
		return nil, fmt.Errorf("fake GitHub: %w", err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		gh.Close()
		return nil, err
	}
	gh.AppPublicKey, gh.AppID = &key.PublicKey, 99
	gh.SetInstallation("acme/infra", 5)
	gh.SetRepository("acme/infra", map[string]any{"clone_url": bare, "default_branch": "main"})
	gh.SetCommit("acme/infra", deepHead, fakegithub.Commit{AuthorLogin: "mallory", CommitterLogin: "mallory"})
	return &cluster{gh: gh, appKey: key, deepHead: deepHead, pullRequest: pr}, nil
}

// pushDeepTF commits deepTFFile on a branch of the work tree and pushes it to the bare
// repository as pull request #1's head (refs/pull/1/head, where GitHub keeps it), returning it.
func pushDeepTF(work, bare string) (string, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-C", work}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=mallory", "GIT_AUTHOR_EMAIL=mallory@example.com", "GIT_COMMITTER_NAME=mallory", "GIT_COMMITTER_EMAIL=mallory@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	if _, err := git("switch", "-q", "-c", "deep"); err != nil {
		return "", err
	}
	deep := strings.Repeat("b {\n", 170_000) + strings.Repeat("}\n", 170_000)
	if err := os.WriteFile(filepath.Join(work, deepTFFile), []byte(deep), 0o644); err != nil {
		return "", err
	}
	if _, err := git("add", deepTFFile); err != nil {
		return "", err
	}
	if _, err := git("commit", "-q", "-m", "Nest the Kafka module"); err != nil {
		return "", err
	}
	head, err := git("rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	if _, err := git("push", "-q", bare, "HEAD:refs/pull/1/head"); err != nil {
		return "", err
	}
	_, err = git("switch", "-q", "main")
	return head, err
}

func (c *cluster) close() { c.gh.Close() }

// serveFiles is one run's parley serve: its configuration file and what it names.
type serveFiles struct {
	config, keyFile, store string
	admissionAddr          string
	admissionToken         string
	agentToken             string // for /v1/plans (the bigplan attack)
	pool                   *x509.CertPool
}

// writeServe writes dir's configuration for parley serve: the GitHub webhook on addr, operations
// on opsAddr, the admission webhook (cluster prod, deny mode) on its own TLS listener, the
// reverse proxy at 127.0.0.proxyAddr trusted, and an agent token made with `parley tokens create`.
func writeServe(parley, dir string, c *cluster, addr, opsAddr string) (*serveFiles, error) {
	pool, err := admissionrig.WriteTLS(dir)
	if err != nil {
		return nil, err
	}
	f := &serveFiles{config: filepath.Join(dir, "parley.hcl"), keyFile: filepath.Join(dir, "app.pem"), store: filepath.Join(dir, "parley.db"),
		admissionAddr: freePort(), admissionToken: rand.Text(), pool: pool}
	key := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(c.appKey)})
	if err := os.WriteFile(f.keyFile, key, 0o600); err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(dir, "admission-token")
	if err := os.WriteFile(tokenFile, []byte(f.admissionToken+"\n"), 0o600); err != nil {
		return nil, err
	}
	config := fmt.Sprintf(`app_id                  = 99
webhook_secrets         = ["hook"]
github_url              = %q
store                   = %q
listen                  = %q
metrics_listen          = %q
log_level               = %q
write_mode              = "direct"
trusted_proxies         = ["127.0.0.%d/32"]
admission_listen        = %q
admission_tls_cert_file = %q
admission_tls_key_file  = %q
cluster "prod" {
  repository = "acme/infra"
}
admission "prod" {
  mode       = "deny"
  token_file = %q
}
`, c.gh.URL+"/api/v3/", f.store, addr, opsAddr, logLevel, proxyAddr, f.admissionAddr, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), tokenFile)
	if pprofListen != "" {
		config += fmt.Sprintf("pprof_listen            = %q\n", pprofListen)
	}
	if err := os.WriteFile(f.config, []byte(config), 0o600); err != nil {
		return nil, err
	}
	create := exec.Command(parley, "tokens", "create", "planner", "--identity", "aws-principal:arn:aws:iam::123456789012:role/planner",
		"--repository", "acme/infra", "--db", filepath.Join(dir, "agents.db"))
	out, err := create.Output()
	if err != nil {
		return nil, fmt.Errorf("parley tokens create: %w", err)
	}
	f.agentToken = strings.TrimSpace(string(out))
	return f, nil
}

// admissionResult is what the valid admission reviews of a run were answered.
type admissionResult struct {
	sent, errors, unjudged, wrong int
	firstError, firstWrong        string
	lat                           []time.Duration // sorted
}

// warmUp sends review 0 until it is judged: serve loads the repository in the background at
// start, and answers unjudged until it has.
func warmUp(c *http.Client, url, token string, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		a, err := admissionrig.Send(c, url, token, busycluster.Review(0), "uid-0", time.Now())
		switch {
		case err != nil:
			last = err
		case a.Unjudged():
			last = fmt.Errorf("answered unjudged: %v", a.Response.Warnings)
		default:
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("no admission review judged within %s: %v", within, last)
}

// admissions sends the busy cluster's reviews at rate a second until ctx ends, open loop (latency
// from when each was due), over one HTTP/2 connection as the API server does, and checks each
// answer against the decision the mix calls for (deny mode: the HPA scales and ConfigMap edits
// allowed, the cost optimizer's scale-downs denied).
func admissions(ctx context.Context, c *http.Client, url, token string, rate int) *admissionResult {
	type answer struct {
		lat      time.Duration
		err      error
		unjudged bool
		wrong    string
	}
	var (
		mu      sync.Mutex
		answers []answer
		wg      sync.WaitGroup
	)
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := 1; ; i++ {
		due := start.Add(time.Duration(i-1) * interval)
		if wait := time.Until(due); wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			uid := types.UID(fmt.Sprintf("uid-%d", i))
			a, err := admissionrig.Send(c, url, token, busycluster.Review(i), uid, due)
			got := answer{lat: a.Latency, err: err}
			if err == nil {
				got.unjudged = a.Unjudged()
				if want := busycluster.Mix(i) != busycluster.CostScaleDown; !got.unjudged && a.Response.Allowed != want {
					got.wrong = fmt.Sprintf("review %d (%v) answered allowed=%v: %v", i, busycluster.Mix(i), a.Response.Allowed, a.Response.Result)
				}
			}
			mu.Lock()
			answers = append(answers, got)
			mu.Unlock()
		})
	}
	wg.Wait()
	r := &admissionResult{sent: len(answers)}
	for _, a := range answers {
		r.lat = append(r.lat, a.lat)
		switch {
		case a.err != nil:
			r.errors++
			if r.firstError == "" {
				r.firstError = a.err.Error()
			}
		case a.unjudged:
			r.unjudged++
		case a.wrong != "":
			r.wrong++
			if r.firstWrong == "" {
				r.firstWrong = a.wrong
			}
		}
	}
	slices.Sort(r.lat)
	return r
}

// bigMapReview is an AdmissionReview of Deployment svc-(i mod 1000) updated by a user the API
// server authenticated (any user allowed to update a Deployment can send it), whose nodeSelector
// carries keys keys: issue 34's 90,000-key map is 1.4 MB, under etcd's object limit.
func bigMapReview(i, keys int) []byte {
	var sel strings.Builder
	for k := range keys {
		if k > 0 {
			sel.WriteByte(',')
		}
		fmt.Fprintf(&sel, `"node.example.com/k%06d":"v"`, k)
	}
	name := fmt.Sprintf("svc-%d", i%busycluster.Deployments)
	deployment := func(selector string) string {
		return fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%q,"namespace":"prod"},`+
			`"spec":{"replicas":2,"selector":{"matchLabels":{"app":%q}},"template":{"metadata":{"labels":{"app":%q}},`+
			`"spec":{"nodeSelector":{%s},"containers":[{"name":"app","image":"registry.example.com/%s:1.0.0"}]}}}}`, name, name, name, selector, name)
	}
	return fmt.Appendf(nil, `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"bigmap-%d",`+
		`"kind":{"group":"apps","version":"v1","kind":"Deployment"},"resource":{"group":"apps","version":"v1","resource":"deployments"},`+
		`"name":%q,"namespace":"prod","operation":"UPDATE","userInfo":{"username":"mallory@example.com","groups":["system:authenticated"]},`+
		`"object":%s,"oldObject":%s,"dryRun":false}}`, i, name, deployment(sel.String()), deployment(""))
}

// bigPlan is a Terraform plan (terraform show -json) listing resources resources, each an update
// of one attribute, compact so that 300,000 fit under the 64 MiB a plan may be: issue 34's
// 300,000-resource plan peaked at 1.2 GiB before plans had a budget.
func bigPlan(resources int) []byte {
	var b strings.Builder
	b.WriteString(`{"format_version":"1.2","resource_changes":[`)
	for i := range resources {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"address":"a.b%d","mode":"managed","type":"a","name":"b%d","change":{"actions":["update"],"before":{"x":1},"after":{"x":2}}}`, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// The attacks' bodies, built once, before the first run: building a 30 MB plan inside a run
// would take the load generator's CPU while it should be sending.
var (
	bigMapBody  = sync.OnceValue(func() []byte { return bigMapReview(7, sizes.bigMapKeys) })
	bigPlanBody = sync.OnceValue(func() []byte { return bigPlan(sizes.planResources) })
)
