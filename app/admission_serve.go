package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/webhooks/guard"
)

// newAdmission builds the admission webhook from the admission blocks; nil when there are none.
func newAdmission(cfg config.Config, drift *Drift, failures *guard.Failures, reg prometheus.Registerer, log *slog.Logger) (*Admission, error) {
	if len(cfg.Admission) == 0 {
		return nil, nil
	}
	m, err := NewAdmissionMetrics(reg)
	if err != nil {
		return nil, err
	}
	h := &Admission{Drift: drift, Clusters: cfg.Admission, Routes: cfg.Clusters, MaxAge: cfg.ProposalsMaxAge, Log: log, Metrics: m, Failures: failures,
		ClientCAs: map[string]*x509.CertPool{}, warm: newWarmStacks(0)}
	for name, a := range cfg.Admission {
		if a.ClientCAFile == "" {
			continue
		}
		pem, err := os.ReadFile(a.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("admission %q: client_ca_file: %w", name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("admission %q: client_ca_file %s holds no PEM certificate", name, a.ClientCAFile)
		}
		h.ClientCAs[name] = pool
	}
	return h, nil
}

// admissionServer is the HTTPS server of admission_listen: the API server calls webhooks over
// TLS only. It asks for a client certificate (checked per cluster by Admission.authenticate) and
// reads the certificate files again when they change, as cert-manager renews them in place.
func admissionServer(cfg config.Config, h http.Handler) (*http.Server, error) {
	certs := &certFiles{cert: cfg.AdmissionTLSCertFile, key: cfg.AdmissionTLSKeyFile}
	if _, err := certs.get(nil); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(AdmissionPrefix, h)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	return &http.Server{Handler: http.MaxBytesHandler(mux, maxAdmissionBody+1<<10), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 35 * time.Second, IdleTimeout: 2 * time.Minute,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert, GetCertificate: certs.get}}, nil
}

// certFiles serves a certificate and key from files, loaded again when either file changes.
type certFiles struct {
	cert, key string

	mu     sync.Mutex
	loaded *tls.Certificate
	stamp  [2]time.Time
}

func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	var stamp [2]time.Time
	for i, p := range []string{c.cert, c.key} {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("admission TLS: %w", err)
		}
		stamp[i] = fi.ModTime()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded != nil && stamp == c.stamp {
		return c.loaded, nil
	}
	kp, err := tls.LoadX509KeyPair(c.cert, c.key)
	if err != nil {
		if c.loaded != nil {
			return c.loaded, nil // a renewal half written: keep serving the last good pair
		}
		return nil, fmt.Errorf("admission TLS: %w", err)
	}
	c.loaded, c.stamp = &kp, stamp
	return c.loaded, nil
}

// Warm loads each admission cluster's repository once, so that the first review after a start
// is judged rather than failing open while the repository is cloned.
func (h *Admission) Warm(ctx context.Context) {
	for name, route := range h.Routes {
		if _, ok := h.Clusters[name]; !ok {
			continue
		}
		if _, err := h.Drift.WithBranch(ctx, route.Repository, h.MaxAge, func(reconcile.Snapshot) error { return nil }); err != nil && ctx.Err() == nil {
			h.log().Error("admission: the cluster's repository could not be loaded; its reviews fail open until it can", "cluster", name,
				"repository", route.Repository, "error", err.Error())
		}
	}
}
