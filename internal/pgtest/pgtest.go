// Package pgtest runs a real PostgreSQL server for tests and benchmarks: Debian's postgresql
// package (initdb and pg_ctl) in a temporary directory, on a free loopback port, as a user that is
// not root (PostgreSQL refuses to run as root, so as root it runs as the postgres user). Each test
// gets a database of its own on one server per test binary.
//
// A package whose tests use it runs them through Main:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Where PostgreSQL is not installed, DSN skips the test saying how to install it; under CI=true it
// fails instead, since .ci/run installs it.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options tune a server.
type Options struct {
	// Durable keeps fsync and synchronous commit on, as a production server runs: what a
	// benchmark of acknowledged durability must measure. Tests leave it off for speed; the
	// semantics a test checks do not depend on it.
	Durable bool
}

// Server is a running PostgreSQL.
type Server struct {
	dir     string // the temporary directory: data, socket, log
	bin     string // the directory of initdb, pg_ctl and postgres
	Port    int
	asOther bool // run the binaries as the postgres user (this process is root)
	dbs     atomic.Int64
}

// Bin finds PostgreSQL's server binaries: $PARLEY_PG_BIN, else the newest
// /usr/lib/postgresql/*/bin, else pg_ctl on the PATH.
func Bin() (string, error) {
	if b := os.Getenv("PARLEY_PG_BIN"); b != "" {
		return b, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL's pg_ctl was not found in /usr/lib/postgresql/*/bin or on the PATH (install it: apt-get install -y postgresql)")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start initialises a cluster in a new temporary directory and starts it. Stop removes both.
func Start(ctx context.Context, o Options) (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "parley-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin, asOther: os.Geteuid() == 0}
	if s.asOther {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("PostgreSQL refuses to run as root, and there is no postgres user to run it as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run(ctx, "initdb", "-D", data, "-U", "parley", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	settings := []string{"-c listen_addresses=127.0.0.1", "-k " + dir, "-c max_connections=300", "-c shared_buffers=64MB"}
	if !o.Durable {
		settings = append(settings, "-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off")
	}
	// A port found free may be taken before the server binds it: try a few.
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		opts := strings.Join(append([]string{"-p " + strconv.Itoa(port)}, settings...), " ")
		out, err := s.run(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(dir, "server.log"), "-o", opts, "-w", "-t", "60", "start")
		if err == nil {
			s.Port = port
			return s, nil
		}
		log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		if !strings.Contains(string(log), "already in use") {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pg_ctl start: %w\n%s\n%s", err, out, log)
		}
	}
	os.RemoveAll(dir)
	return nil, errors.New("pg_ctl start: no free port after 5 attempts")
}

func (s *Server) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	path := filepath.Join(s.bin, name)
	var cmd *exec.Cmd
	if s.asOther {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = s.dir
	return cmd.CombinedOutput()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// DSN is the connection string of database db on the server.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://parley@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// CreateDatabase creates a new, empty database and returns its connection string.
func (s *Server) CreateDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.dbs.Add(1))
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return s.DSN(name), nil
}

// PID is the server's postmaster process, read from its postmaster.pid file: the parent of every
// backend, for a benchmark that counts the server's CPU.
func (s *Server) PID() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	return pid, nil
}

// Stop stops the server and removes its directory.
func (s *Server) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := s.run(ctx, "pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	rmErr := os.RemoveAll(s.dir)
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return rmErr
}

// The test binary's shared server, started by the first DSN call and stopped by Main.
var shared struct {
	mu     sync.Mutex
	server *Server
	err    error
	inMain bool
}

// Main runs the tests and stops the shared server, if one was started.
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.inMain = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	if shared.server != nil {
		if err := shared.server.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// DSN returns the connection string of a new database on the test binary's shared server,
// starting the server on first use. It skips the test where PostgreSQL is not installed (fails
// under CI=true).
func DSN(t testing.TB) string {
	t.Helper()
	shared.mu.Lock()
	if !shared.inMain {
		shared.mu.Unlock()
		t.Fatal("pgtest: the package's TestMain must call pgtest.Main(m), which stops the server")
	}
	if shared.server == nil && shared.err == nil {
		if _, err := Bin(); err != nil {
			shared.err = err
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			shared.server, shared.err = Start(ctx, Options{})
			cancel()
		}
	}
	srv, err := shared.server, shared.err
	shared.mu.Unlock()
	if err != nil {
		if _, missing := Bin(); missing != nil && os.Getenv("CI") != "true" {
			t.Skip("pgtest: " + missing.Error())
		}
		t.Fatal("pgtest: ", err)
	}
	dsn, err := srv.CreateDatabase(context.Background())
	if err != nil {
		t.Fatal("pgtest: ", err)
	}
	return dsn
}
