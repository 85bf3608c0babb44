package main

import (
	"bytes"
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
	"syscall"
	"testing"
	"time"

	"github.com/parleyhq/parley/app/report"
	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/internal/npmdata"
	"github.com/parleyhq/parley/internal/schematest"
)

// TestServeEndToEnd runs the built parley binary as `parley serve` against the OpenAPI-built fake
// GitHub and a real repository: a signed pull_request delivery yields one check run and one sticky
// comment; SIGKILL with deliveries in flight and a restart process every delivery exactly once;
// SIGTERM drains and exits cleanly.
func TestServeEndToEnd(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "parley")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build parley: %v\n%s", err, out)
	}
	gh := fakegithub.New(t)
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	gh.AppPublicKey, gh.AppID = &key.PublicKey, 31337
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)

	repo, git := cliRepo(t)
	pol, _ := os.ReadFile(filepath.Join("..", "..", "internal", "demo", "policy.hcl"))
	// serve judges at the wall clock: on the days of the demo's peak-sales freeze the change would
	// be deferred (action_required), so the freeze is left out and the verdict is the same any day.
	pol = regexp.MustCompile(`(?s)\nfreeze "peak-sales" \{.*?\n\}\n`).ReplaceAll(pol, []byte("\n"))
	if bytes.Contains(pol, []byte("freeze \"")) {
		t.Fatal("the demo policy's freeze was not left out")
	}
	writeFile(t, filepath.Join(repo, ".parley/policy.hcl"), string(pol))
	writeFile(t, filepath.Join(repo, "infra/kafka/main.tf"), "resource \"aws_autoscaling_group\" \"consumer\" {\n  min_size = 4\n  max_size = 16\n  desired_capacity = 6\n}\n")
	git("add", "-A")
	git("commit", "-q", "-m", "Baseline")
	base := git("rev-parse", "HEAD")
	const prs = 6
	heads := map[int]string{}
	for n := 1; n <= prs; n++ {
		git("checkout", "-q", "-b", fmt.Sprintf("pr%d", n), base)
		writeFile(t, filepath.Join(repo, "infra/kafka/main.tf"), fmt.Sprintf("resource \"aws_autoscaling_group\" \"consumer\" {\n  min_size = 4\n  max_size = 16\n  desired_capacity = %d\n}\n", 6+n))
		git("commit", "-q", "-am", fmt.Sprintf("Capacity %d\n\nIntent: cost\nMotivation: budget\n", 6+n))
		heads[n] = git("rev-parse", "HEAD")
		git("update-ref", fmt.Sprintf("refs/pull/%d/head", n), "HEAD")
		// The pull request's commit is its opener's own, the cost optimizer's: GitHub verified its
		// signature (each commit's author is judged too, and an unverified one may not write the
		// capacity).
		gh.SetCommit("acme/infra", heads[n], fakegithub.Commit{AuthorLogin: "cost-optimizer[bot]", CommitterLogin: "cost-optimizer[bot]", Verified: true})
	}
	git("checkout", "-q", "main")
	cloneURL := serveGit(t, repo)

	storeDir := t.TempDir()
	secret := "e2e-webhook-secret"
	start := func() (*exec.Cmd, string) {
		t.Helper()
		p := startServe(t, bin, "PARLEY_APP_ID=31337", "PARLEY_PRIVATE_KEY_FILE="+keyFile, "PARLEY_WEBHOOK_SECRETS=old-secret,"+secret,
			"PARLEY_LISTEN=127.0.0.1:0", "PARLEY_STORE="+filepath.Join(storeDir, "parley.db"), "PARLEY_GITHUB_URL="+gh.URL+"/api/v3/",
			"PARLEY_WORKERS=2", "PARLEY_SHUTDOWN_GRACE=10s")
		return p.cmd, p.url
	}
	deliver := func(url string, n int) int {
		t.Helper()
		body := prPayload(t, cloneURL, base, heads[n], n)
		req, _ := http.NewRequest("POST", url+"/webhooks/github", bytes.NewReader(body))
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "pull_request")
		req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("00000000-0000-4000-8000-%012d", n))
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if cond() {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s; GitHub calls %v", what, gh.Calls())
	}

	cmd, url := start()
	if code := deliver(url, 1); code != http.StatusAccepted {
		t.Fatalf("delivery answered %d", code)
	}
	waitFor("the first verdict", func() bool { return len(gh.Comments("acme/infra#1")) == 1 })
	runs := gh.CheckRuns("acme/infra")
	if len(runs) != 1 || runs[0].HeadSHA != heads[1] || runs[0].Conclusion != "success" {
		t.Fatalf("check runs %+v", runs)
	}
	if raw, err := report.RawData(gh.Comments("acme/infra#1")[0].Body); err != nil {
		t.Fatal(err)
	} else {
		schematest.Validate(t, "verdicts-document.schema.json", raw)
	}
	if doc, err := report.Extract(gh.Comments("acme/infra#1")[0].Body); err != nil || len(doc.Verdicts) != 1 {
		t.Fatalf("comment verdicts %+v %v", doc, err)
	}
	// The judgement is counted just after its comment is written: wait for the count, not only the
	// comment.
	var metrics bytes.Buffer
	waitFor("the judgement's metrics", func() bool {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics.Reset()
		metrics.ReadFrom(resp.Body)
		resp.Body.Close()
		return strings.Contains(metrics.String(), "parley_github_calls_per_judgement_count 1")
	})
	for _, m := range []string{"parley_github_calls_per_judgement_count 1", "parley_github_calls_total{", "parley_github_rate_limit_remaining", "parley_webhook"} {
		if !strings.Contains(metrics.String(), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}

	// SIGKILL while deliveries are being handled; every acknowledged one must be handled after a
	// restart, and none twice.
	acked := map[int]bool{}
	for n := 2; n <= prs; n++ {
		if deliver(url, n) == http.StatusAccepted {
			acked[n] = true
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	cmd, url = start()
	for n := 1; n <= prs; n++ { // GitHub redelivers: the same delivery IDs again
		deliver(url, n)
	}
	waitFor("every pull request judged", func() bool {
		for n := 1; n <= prs; n++ {
			if len(gh.Comments(fmt.Sprintf("acme/infra#%d", n))) < 1 {
				return false
			}
		}
		return true
	})
	for n := 1; n <= prs; n++ {
		if c := gh.Comments(fmt.Sprintf("acme/infra#%d", n)); len(c) != 1 {
			t.Errorf("pull request %d has %d comments, want exactly 1", n, len(c))
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
	if len(acked) == 0 {
		t.Error("no delivery was acknowledged before the kill")
	}

	// SIGTERM drains and exits 0.
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("parley serve exited with %v after SIGTERM", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("parley serve did not stop within 20 s of SIGTERM")
	}
}

// serveGit serves the repository over smart HTTP with the real git http-backend.
func serveGit(t *testing.T, repo string) string { return gittest.ServeHTTP(t, repo, false) }

// prPayload is GitHub's own pull_request "opened" example, pointed at the test repository.
func prPayload(t testing.TB, cloneURL, base, head string, n int) []byte {
	t.Helper()
	b, err := npmdata.PatchedWebhookExample("pull_request", "opened", func(ev map[string]any) {
		ev["number"] = n
		ev["installation"] = map[string]any{"id": 5, "node_id": "x"}
		repo := ev["repository"].(map[string]any)
		repo["full_name"], repo["name"], repo["clone_url"], repo["default_branch"] = "acme/infra", "infra", cloneURL, "main"
		repo["owner"].(map[string]any)["login"] = "acme"
		pr := ev["pull_request"].(map[string]any)
		pr["number"] = n
		pr["head"].(map[string]any)["sha"] = head
		pr["base"].(map[string]any)["sha"] = base
		pr["user"].(map[string]any)["login"] = "cost-optimizer[bot]"
	})
	if err != nil {
		npmdata.FatalOrSkip(t, err) // skipped if npm is needed to fetch the examples and is not installed
	}
	return b
}
