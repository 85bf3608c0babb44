package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
)

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns their paths and a pool
// trusting it (the webhook's caBundle).
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "parley-admission"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}

// TestServeAdmissionOverTLS: parley serve with an admission block answers the API server's
// reviews on its HTTPS admission listener, authenticates them by token, and counts the decisions
// on /metrics.
func TestServeAdmissionOverTLS(t *testing.T) {
	gh, _, pemKey := fakeApp(t)
	hostDemo(t, gh, "acme/prod-eu", 5)
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	tokFile := filepath.Join(dir, "token")
	os.WriteFile(tokFile, []byte(admissionToken+"\n"), 0o600)
	cfgFile := filepath.Join(dir, "parley.hcl")
	os.WriteFile(cfgFile, []byte(`
cluster "eu-1" {
  repository = "acme/prod-eu"
}
admission "eu-1" {
  mode       = "deny"
  token_file = "`+tokFile+`"
}
admission_listen        = "127.0.0.1:0"
admission_tls_cert_file = "`+certFile+`"
admission_tls_key_file  = "`+keyFile+`"
`), 0o600)
	env := map[string]string{"PARLEY_APP_ID": "99", "PARLEY_PRIVATE_KEY": string(pemKey), "PARLEY_WEBHOOK_SECRETS": "hook",
		"PARLEY_GITHUB_URL": gh.URL + "/api/v3/", "PARLEY_STORE": filepath.Join(dir, "parley.db"), "PARLEY_LISTEN": "127.0.0.1:0"}
	srv, base, stop := runServeFile(t, cfgFile, env)
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	post := func(token string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "https://"+srv.AdmissionAddr()+AdmissionPrefix+"eu-1",
			strings.NewReader(scaleReview("cost-1", costSA, 3, 2, false)))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, b := post(""); code != http.StatusUnauthorized {
		t.Fatalf("without the token: %d %s", code, b)
	}
	code, b := post(admissionToken)
	var rev admissionv1.AdmissionReview
	if err := json.Unmarshal(b, &rev); code != http.StatusOK || err != nil || rev.Response == nil || rev.Response.Allowed ||
		!strings.Contains(rev.Response.Result.Message, "hpa is the standing owner") {
		t.Fatalf("cost optimizer's scale: %d %s", code, b)
	}
	// The main listener does not serve admission (it is plain HTTP); it serves the metrics.
	if resp, err := http.Post(base+AdmissionPrefix+"eu-1", "application/json", strings.NewReader("{}")); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("admission on the main listener: %v %v", resp, err)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`parley_admission_reviews_total{cluster="eu-1",decision="denied",dry_run="false"} 1`,
		`parley_admission_reviews_total{cluster="eu-1",decision="rejected",dry_run="false"} 1`} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// The reviews' warm-stack workers live while serve serves them, and end with it.
	if all, _ := poolWorkers(srv.admission.warm); all != runtime.GOMAXPROCS(0) {
		t.Errorf("serving: %d warm-stack workers, want GOMAXPROCS (%d)", all, runtime.GOMAXPROCS(0))
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if all, _ := poolWorkers(srv.admission.warm); all != 0 {
		t.Errorf("%d warm-stack workers still running after serve returned", all)
	}
}
