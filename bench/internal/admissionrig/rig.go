// Package admissionrig is what the benchmark programs that call parley serve's admission webhook
// share (bench/admission, bench/attack): the serving certificate the API server trusts, the API
// server's side of the connection, and one review sent and its answer checked.
package admissionrig

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
)

// WriteTLS writes a CA and a serving certificate for 127.0.0.1 it signed (dir/tls.crt, tls.key), as
// the chart's genCA and genSignedCert do, and the CA (dir/ca.crt, for another process), and returns
// the pool holding the CA (the caBundle).
func WriteTLS(dir string) (*x509.CertPool, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "parley-bench-ca"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "parley-admission"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pemBlock("CERTIFICATE", der), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pemBlock("EC PRIVATE KEY", kder), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), pemBlock("CERTIFICATE", caDER), 0o600); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool, nil
}

// Client is the API server's side of the connection: TLS verified against the generated CA, and
// HTTP/2, as the API server calls webhooks (one connection, many streams), each call bounded by
// timeout (the webhook's timeoutSeconds). When every stream a server allows on a connection is
// in flight (250 for Go's servers), the transport opens another connection instead of queueing
// the request (StrictMaxConcurrentRequests off, as in the API server's HTTP/2 client), and no
// per-host connection cap applies: the load generator's own settings never hold a review back,
// so a stalled server shows in its latencies, not in the sender's lateness.
func Client(pool *x509.CertPool, timeout time.Duration) *http.Client {
	var protos http.Protocols
	protos.SetHTTP2(true)
	return &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		Protocols: &protos, MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0, HTTP2: &http.HTTP2Config{StrictMaxConcurrentRequests: false}}}
}

// Answer is what a webhook answered one review.
type Answer struct {
	Latency  time.Duration // from when the review was due to its answer (or error)
	Proto    string        // the protocol it came in
	Response *admissionv1.AdmissionResponse
}

// Unjudged says whether the answer is Parley's fail-open one: allowed, with the warning that it
// could not judge the write.
func (a Answer) Unjudged() bool {
	return a.Response != nil && slices.ContainsFunc(a.Response.Warnings, func(w string) bool { return strings.Contains(w, "could not judge") })
}

// Send posts one review with the API server's bearer token and checks the answer is an
// AdmissionReview for uid. The latency counts from due, when the review should have left.
func Send(c *http.Client, url, token string, body []byte, uid types.UID, due time.Time) (Answer, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return Answer{Latency: time.Since(due)}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	a := Answer{Latency: time.Since(due), Proto: resp.Proto}
	if err != nil {
		return a, err
	}
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("%s answered %s: %s", url, resp.Status, Tail(string(b), 200))
	}
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(b, &got); err != nil || got.Response == nil || got.Response.UID != uid {
		return a, fmt.Errorf("%s answered no AdmissionReview for %s: %v %s", url, uid, err, Tail(string(b), 200))
	}
	a.Response = got.Response
	return a, nil
}

// Tail is the last n bytes of s, marked as cut when they are not all of it.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
