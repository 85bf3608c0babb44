package main

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/parleyhq/parley/internal/fakegithub"
)

func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// firehoseAuditRequest is request n of an EKS audit stream's Firehose delivery: one patch of
// Deployment prod/web-n, in a gzip CloudWatch Logs subscription message.
func firehoseAuditRequest(n int) []byte {
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")
	ev := fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Request","auditID":"e2e-audit-%04d","stage":"ResponseComplete",`+
		`"requestURI":"/apis/apps/v1/namespaces/prod/deployments/web-%d","verb":"patch","user":{"username":"cost-optimizer"},`+
		`"objectRef":{"resource":"deployments","namespace":"prod","name":"web-%d","apiGroup":"apps","apiVersion":"v1"},`+
		`"responseStatus":{"metadata":{},"code":200},"requestObject":{"spec":{"replicas":%d}},`+
		`"requestReceivedTimestamp":%q,"stageTimestamp":%q}`, n, n, n, n%7+1, now, now)
	msg, _ := json.Marshal(map[string]any{"messageType": "DATA_MESSAGE", "owner": "111122223333", "logGroup": "/aws/eks/eks/cluster",
		"logStream": "kube-apiserver-audit-1", "subscriptionFilters": []string{"parley"},
		"logEvents": []map[string]any{{"id": fmt.Sprint(n), "timestamp": time.Now().UnixMilli(), "message": ev}}})
	body, _ := json.Marshal(map[string]any{"requestId": fmt.Sprintf("e2e-request-%04d", n), "timestamp": time.Now().UnixMilli(),
		"records": []map[string]string{{"data": base64.StdEncoding.EncodeToString(gzipBytes(msg))}}})
	return gzipBytes(body)
}

// TestServeFirehoseSurvivesSIGKILL: Firehose requests arrive while the serve binary is killed
// (SIGKILL); Firehose retries every request not answered 200, and some answered ones again (an
// answer lost with the process), never the others. After the restart every request's events are
// stored exactly once: nothing acknowledged is lost, nothing retried is stored twice.
func TestServeFirehoseSurvivesSIGKILL(t *testing.T) {
	bin := buildParley(t)
	gh := fakegithub.New(t)
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	gh.AppPublicKey, gh.AppID = &key.PublicKey, 31337
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "app.pem")
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
	accessKey := filepath.Join(dir, "firehose-key")
	os.WriteFile(accessKey, []byte("e2e-firehose-access-key\n"), 0o600)
	cfg := filepath.Join(dir, "parley.hcl")
	os.WriteFile(cfg, []byte(fmt.Sprintf("cluster \"eks\" {\n  repository = \"acme/infra\"\n}\nfirehose \"eks\" {\n  access_key_file = %q\n}\n", accessKey)), 0o600)
	db := filepath.Join(dir, "parley.db")
	start := func() *serveProc {
		return startServeConfig(t, bin, cfg, "PARLEY_APP_ID=31337", "PARLEY_PRIVATE_KEY_FILE="+keyFile, "PARLEY_WEBHOOK_SECRETS=hook",
			"PARLEY_LISTEN=127.0.0.1:0", "PARLEY_STORE="+db, "PARLEY_GITHUB_URL="+gh.URL+"/api/v3/", "PARLEY_WORKERS=1", "PARLEY_MAX_ATTEMPTS=1")
	}
	send := func(url string, n int) int {
		req, _ := http.NewRequest(http.MethodPost, url+"/events/firehose/eks", bytes.NewReader(firehoseAuditRequest(n)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", "gzip")
		req.Header.Set("X-Amz-Firehose-Protocol-Version", "1.0")
		req.Header.Set("X-Amz-Firehose-Request-Id", fmt.Sprintf("e2e-request-%04d", n))
		req.Header.Set("X-Amz-Firehose-Access-Key", "e2e-firehose-access-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0 // the process died with the request
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	const requests = 60
	p := start()
	var mu sync.Mutex
	acked := map[int]bool{}
	var wg sync.WaitGroup
	next := make(chan int)
	for range 4 {
		wg.Go(func() {
			for n := range next {
				if send(p.url, n) == http.StatusOK {
					mu.Lock()
					acked[n] = true
					mu.Unlock()
				}
			}
		})
	}
	for n := range requests {
		if n == requests/2 {
			p.cmd.Process.Signal(syscall.SIGKILL) // with requests in flight on the other senders
		}
		next <- n
	}
	close(next)
	wg.Wait()
	p.cmd.Wait()
	if len(acked) == 0 || len(acked) == requests {
		t.Fatalf("%d of %d requests acknowledged before the kill: the kill did not land mid-stream", len(acked), requests)
	}

	p = start()
	// Firehose retries what was not acknowledged, and some acknowledged requests whose answer it
	// did not read; the others it never sends again, so they must have been stored before their
	// 200.
	for n := range requests {
		if acked[n] && n%3 != 0 {
			continue
		}
		if code := send(p.url, n); code != http.StatusOK {
			t.Fatalf("retry of request %d: %d", n, code)
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()

	sqlDB, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	rows, err := sqlDB.Query(`SELECT id FROM deliveries WHERE source = 'k8s-audit'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	stored := map[string]int{}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		stored[id]++
	}
	if len(stored) != requests {
		t.Errorf("%d deliveries stored, want %d (one per request)", len(stored), requests)
	}
	for n := range requests {
		if id := fmt.Sprintf("firehose-e2e-request-%04d-0@eks", n); stored[id] != 1 {
			t.Errorf("request %d (acknowledged before the kill: %v) stored %d times", n, acked[n], stored[id])
		}
	}
}

// startServeConfig is startServe with a configuration file.
func startServeConfig(t testing.TB, bin, cfg string, env ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--config", cfg)
	cmd.Env = append(os.Environ(), env...)
	logs := &syncBuffer{}
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
