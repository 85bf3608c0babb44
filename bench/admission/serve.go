package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/parleyhq/parley/bench/internal/admissionrig"
	"github.com/parleyhq/parley/internal/pgtest"
)

// serveReplica is one parley serve process and the API server's connection to it.
type serveReplica struct {
	name   string // "parley serve", or "parley serve replica N" when there are several
	cmd    *exec.Cmd
	proc   *proc
	log    string // its log file
	ops    string // its metrics listener: /readyz, /metrics
	url    string // its admission endpoint for the cluster "prod"
	client *http.Client
}

// startServe writes replica i's configuration (its own ports and data_dir, the clone cache a
// pod keeps on its own volume; the store, the repository, the certificate and the token shared)
// and starts it.
func startServe(bin, dir string, i int, store, githubURL string, o options, pool *x509.CertPool) (*serveReplica, error) {
	listen, ops, admission := freePort(), freePort(), freePort()
	data := filepath.Join(dir, fmt.Sprintf("data-%d", i))
	if err := os.Mkdir(data, 0o700); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, fmt.Sprintf("parley-%d.hcl", i))
	text := fmt.Sprintf(`app_id                  = 99
webhook_secrets         = ["bench"]
github_url              = %q
store                   = %q
data_dir                = %q
listen                  = %q
metrics_listen          = %q
log_level               = %q
write_mode              = "direct"
admission_listen        = %q
admission_tls_cert_file = %q
admission_tls_key_file  = %q
cluster "prod" {
  repository = "acme/infra"
}
admission "prod" {
  mode       = %q
  token_file = %q
}
`, githubURL, store, data, listen, ops, o.logLevel, admission,
		filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), o.mode, filepath.Join(dir, "admission-token"))
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return nil, err
	}
	r := &serveReplica{name: "parley serve", ops: ops, url: "https://" + admission + "/admission/prod", log: filepath.Join(dir, fmt.Sprintf("serve-%d.log", i))}
	if o.replicas > 1 {
		r.name = fmt.Sprintf("parley serve replica %d", i)
	}
	logFile, err := os.Create(r.log)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own descriptor
	r.cmd = exec.Command(bin, "serve", "--config", conf)
	r.cmd.Env = append(os.Environ(), "PARLEY_PRIVATE_KEY_FILE="+filepath.Join(dir, "app.pem"))
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	if r.proc, err = start(r.cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", r.name, err)
	}
	r.client = admissionrig.Client(pool, o.timeout)
	return r, nil
}

// stop drains the replica and closes the connection to it.
func (r *serveReplica) stop() {
	r.client.CloseIdleConnections()
	r.proc.stop()
}

// logTail is the end of the replica's log, for an error message.
func (r *serveReplica) logTail() string {
	b, _ := os.ReadFile(r.log)
	return admissionrig.Tail(string(b), 2000)
}

// startPostgres starts a throwaway PostgreSQL cluster (internal/pgtest: initdb in a temporary
// directory, a unix socket there and a loopback port) with fsync and synchronous commit on, as a
// production server runs, and creates the database the replicas share. pid is its postmaster, for
// its CPU; stop stops the cluster and removes its directory.
func startPostgres() (dsn string, pid int, stop func(logw io.Writer), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := pgtest.Start(ctx, pgtest.Options{Durable: true})
	if err != nil {
		return "", 0, nil, fmt.Errorf("PostgreSQL: %w", err)
	}
	stop = func(logw io.Writer) {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(logw, "stopping PostgreSQL:", err)
		}
	}
	if dsn, err = srv.CreateDatabase(ctx); err != nil {
		stop(io.Discard)
		return "", 0, nil, fmt.Errorf("PostgreSQL: create the database: %w", err)
	}
	if pid, err = srv.PID(); err != nil {
		stop(io.Discard)
		return "", 0, nil, fmt.Errorf("PostgreSQL: %w", err)
	}
	return dsn, pid, stop, nil
}
