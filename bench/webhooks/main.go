// Command webhooks measures how fast Parley acknowledges GitHub webhook deliveries: the real
// Receiver and store (SQLite on disk, or PostgreSQL with fsync and synchronous commit on), driven
// over loopback HTTP at fixed rates with a synthesised 25 KB pull_request payload.
//
//	go run ./bench/webhooks -rates 200,500,1000 -duration 5s
//	go run ./bench/webhooks -rates 500 -duration 5s -engine sqlite,postgres
//
// -engine postgres starts a PostgreSQL server of its own (Debian's postgresql package, durable
// settings) unless -dsn names one; each rate gets a new database.
// The load is open-loop: request i is due at start + i/rate whether or not earlier requests
// have been answered, and its latency is measured from when it was due, so a stalled server
// shows up in the percentiles instead of slowing the load down (no coordinated omission).
// Every run is bounded: rate*duration requests at most -max-requests, each with a timeout.
// After each rate the store is checked for every acknowledged delivery ID: "lost" must be 0.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/parleyhq/parley/internal/pgtest"
	"github.com/parleyhq/parley/internal/sqldb"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/store"
)

type config struct {
	Rate        int
	Duration    time.Duration
	BodyBytes   int
	Workers     int // >0: run a Pool with no-op handlers draining the queue during the load
	MaxRequests int
	MaxInFlight int
	// Open opens a new, empty store for one rate, and returns what removes it once closed.
	Open func(ctx context.Context) (queue, func(), error)
}

// queue is the store the receiver writes to and the pool drains: SQLite's or PostgreSQL's.
type queue interface {
	store.Deliveries
	Close() error
}

type result struct {
	Rate      int
	Sent      int
	Accepted  int
	Other     map[int]int // status code -> count, for anything but 202
	Errors    int
	Lost      int // acknowledged (202) but not found in the store afterwards
	Stored    int
	Latencies []time.Duration // from due time to response, sorted
	Service   []time.Duration // from actual send to response, sorted
	Elapsed   time.Duration
	// Checkpoints the engine ran while the load ran (SQLite: the store's checkpointer;
	// PostgreSQL: the server's), and SQLite's WAL rewinds (-1: not applicable).
	Checkpoints, Rewinds int64
	LongestRewind        time.Duration
}

// checkpointCounter is a store that says how many checkpoints its engine has run so far.
type checkpointCounter interface {
	CheckpointStats() store.CheckpointStats
}

// pgQueue is the PostgreSQL store with the server's checkpoint counter beside it.
type pgQueue struct {
	*store.Postgres
	stats *sql.DB
}

// CheckpointStats counts the server's checkpoints (timed and requested). PostgreSQL does not
// rewind a WAL: it recycles segments, so Rewinds is -1.
func (q pgQueue) CheckpointStats() store.CheckpointStats {
	var n int64
	ctx := context.Background()
	// pg_stat_checkpointer from PostgreSQL 17 on, pg_stat_bgwriter before.
	err := q.stats.QueryRowContext(ctx, `SELECT num_timed + num_requested FROM pg_stat_checkpointer`).Scan(&n)
	if err != nil {
		if err := q.stats.QueryRowContext(ctx, `SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter`).Scan(&n); err != nil {
			return store.CheckpointStats{Checkpoints: -1, Rewinds: -1}
		}
	}
	return store.CheckpointStats{Checkpoints: n, Rewinds: -1}
}

func (q pgQueue) Close() error { return errors.Join(q.Postgres.Close(), q.stats.Close()) }

func openPGQueue(ctx context.Context, dsn string) (queue, func(), error) {
	st, err := store.OpenPostgres(ctx, dsn, store.PostgresOptions{})
	if err != nil {
		return nil, nil, err
	}
	_, db, err := sqldb.OpenPostgres(ctx, dsn, 1)
	if err != nil {
		_ = st.Close()
		return nil, nil, err
	}
	return pgQueue{Postgres: st, stats: db}, func() {}, nil
}

func main() {
	var (
		rates    = flag.String("rates", "200,500,1000", "comma-separated deliveries per second")
		duration = flag.Duration("duration", 5*time.Second, "how long each rate runs")
		bodySize = flag.Int("body", 25<<10, "payload size in bytes")
		syncMode = flag.String("sync", "full", "SQLite synchronous mode: full or normal")
		workers  = flag.Int("workers", 0, "if >0, run a worker pool with no-op handlers during the load")
		maxReq   = flag.Int("max-requests", 20000, "upper bound on requests per rate")
		dir      = flag.String("dir", "", "directory for the database files (default: a temporary directory, removed afterwards)")
		engines  = flag.String("engine", "sqlite", "comma-separated stores to measure, in turn: sqlite, postgres, disk (the floor: writes and fdatasyncs alone)")
		dsn      = flag.String("dsn", "", "with -engine postgres: a server to use (its database is used as is); default: start one")
	)
	flag.Parse()
	if err := runEngines(os.Stdout, *engines, *dsn, *rates, *duration, *bodySize, *syncMode, *workers, *maxReq, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// diskBytesPerDelivery is what -engine disk writes per delivery: about what the SQLite store
// appends to its WAL for one 25 KB delivery (12 frames of 4 KiB, counted from the checkpointer's
// WAL sizes at 500/s).
const diskBytesPerDelivery = 12 * 4096

// runEngines runs the rates on each engine named, one after the other.
func runEngines(out io.Writer, engines, dsn, rates string, duration time.Duration, bodySize int, syncMode string, workers, maxReq int, dir string) error {
	var failed error
	for _, e := range strings.Split(engines, ",") {
		switch strings.TrimSpace(e) {
		case "sqlite":
			failed = errors.Join(failed, run(out, rates, duration, bodySize, syncMode, workers, maxReq, dir))
		case "postgres":
			if err := checkLoad(rates, duration); err != nil {
				return err
			}
			open, desc, stop, err := postgresOpener(dsn)
			if err != nil {
				return err
			}
			failed = errors.Join(failed, runWith(out, desc, open, rates, duration, bodySize, workers, maxReq))
			stop()
		case "disk":
			failed = errors.Join(failed, runDisk(out, rates, duration, diskBytesPerDelivery, dir))
		default:
			return fmt.Errorf("-engine %q: want sqlite, postgres or disk", e)
		}
		fmt.Fprintln(out)
	}
	return failed
}

// postgresOpener opens a new database per rate on the server dsn names or, without one, on a
// server it starts with production durability (fsync, synchronous commit).
func postgresOpener(dsn string) (open func(context.Context) (queue, func(), error), desc string, stop func(), err error) {
	ctx := context.Background()
	if dsn != "" {
		return func(ctx context.Context) (queue, func(), error) {
			return openPGQueue(ctx, dsn)
		}, "receiver + PostgreSQL at " + sqldb.Redact(dsn), func() {}, nil
	}
	srv, err := pgtest.Start(ctx, pgtest.Options{Durable: true})
	if err != nil {
		return nil, "", nil, fmt.Errorf("start PostgreSQL (or name one with -dsn): %w", err)
	}
	open = func(ctx context.Context) (queue, func(), error) {
		db, err := srv.CreateDatabase(ctx)
		if err != nil {
			return nil, nil, err
		}
		return openPGQueue(ctx, db)
	}
	return open, fmt.Sprintf("receiver + PostgreSQL (local server, fsync=on, synchronous_commit=on, port %d)", srv.Port), func() { _ = srv.Stop() }, nil
}

func run(out io.Writer, rates string, duration time.Duration, bodySize int, syncMode string, workers, maxReq int, dir string) error {
	var mode store.SyncMode
	switch syncMode {
	case "full":
		mode = store.SyncFull
	case "normal":
		mode = store.SyncNormal
	default:
		return fmt.Errorf("-sync %q: want full or normal", syncMode)
	}
	if err := checkLoad(rates, duration); err != nil {
		return err
	}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "parley-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	desc := fmt.Sprintf("receiver + SQLite (synchronous=%s, WAL) on %s", strings.ToUpper(syncMode), dir)
	open := func(ctx context.Context) (queue, func(), error) {
		dbPath := filepath.Join(dir, fmt.Sprintf("bench-%d.db", time.Now().UnixNano()))
		st, err := store.Open(ctx, dbPath, store.Options{Sync: mode})
		return st, func() {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(dbPath + suffix)
			}
		}, err
	}
	return runWith(out, desc, open, rates, duration, bodySize, workers, maxReq)
}

// runWith runs every rate against a new store from open and prints the table.
func runWith(out io.Writer, desc string, open func(context.Context) (queue, func(), error), rates string, duration time.Duration, bodySize, workers, maxReq int) error {
	if err := checkLoad(rates, duration); err != nil {
		return err
	}
	rs, _ := parseRates(rates)
	fmt.Fprintf(out, "%s; %d-byte pull_request payloads; %v per rate; pool workers: %d\n\n", desc, bodySize, duration, workers)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate/s\tsent\t202\tother\terrors\tstored\tlost\tp50\tp90\tp99\tmax\tp99 service\tcheckpoints\trewinds\t")
	var failed error
	for _, r := range rs {
		res, err := runRate(context.Background(), config{
			Rate: r, Duration: duration, BodyBytes: bodySize, Workers: workers,
			MaxRequests: maxReq, MaxInFlight: 4096, Open: open,
		})
		if err != nil {
			return fmt.Errorf("rate %d: %w", r, err)
		}
		other := "0"
		if len(res.Other) > 0 {
			other = fmt.Sprint(res.Other)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r, res.Sent, res.Accepted, other, res.Errors,
			res.Stored, res.Lost, ms(pct(res.Latencies, 50)), ms(pct(res.Latencies, 90)), ms(pct(res.Latencies, 99)),
			ms(pct(res.Latencies, 100)), ms(pct(res.Service, 99)), count(res.Checkpoints), rewinds(res))
		if res.Lost > 0 || res.Accepted != res.Sent {
			failed = errors.Join(failed, fmt.Errorf("rate %d: %d sent, %d acknowledged, %d lost", r, res.Sent, res.Accepted, res.Lost))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nlatency = from the moment a request was due to its response (open loop); service = from actual send.")
	fmt.Fprintln(out, "checkpoints, rewinds = run by the engine between the first request and the last response (rewinds: SQLite's WAL starting over, with the longest time it held the writer).")
	return failed
}

// checkLoad refuses rates and durations the program would not run sensibly.
func checkLoad(rates string, duration time.Duration) error {
	if _, err := parseRates(rates); err != nil {
		return err
	}
	if duration <= 0 || duration > 5*time.Minute {
		return fmt.Errorf("-duration %v: want between 0 and 5m", duration)
	}
	return nil
}

func parseRates(rates string) ([]int, error) {
	var rs []int
	for _, f := range strings.Split(rates, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || r <= 0 {
			return nil, fmt.Errorf("-rates: %q is not a positive integer", f)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// count prints n, or "-" for a count the engine did not give.
func count(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func rewinds(res result) string {
	if res.Rewinds < 0 {
		return "-"
	}
	return fmt.Sprintf("%d (longest %s)", res.Rewinds, ms(res.LongestRewind))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

// pct returns the p-th percentile (nearest rank) of sorted durations.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// payload synthesises a pull_request "opened" event of about size bytes: the shape of
// GitHub's payload (nested repository, user, head/base) with the PR body padded to size.
func payload(size int) []byte {
	user := map[string]any{"login": "octocat", "id": 1, "node_id": "MDQ6VXNlcjE=", "type": "User", "site_admin": false,
		"avatar_url": "https://avatars.githubusercontent.com/u/1?v=4", "html_url": "https://github.com/octocat"}
	repo := map[string]any{"id": 1296269, "node_id": "MDEwOlJlcG9zaXRvcnkxMjk2MjY5", "name": "infra", "full_name": "parleyhq/infra",
		"private": true, "owner": user, "default_branch": "main", "html_url": "https://github.com/parleyhq/infra"}
	ev := map[string]any{
		"action": "opened", "number": 1347,
		"pull_request": map[string]any{
			"url": "https://api.github.com/repos/parleyhq/infra/pulls/1347", "id": 1, "number": 1347, "state": "open",
			"title": "Raise api replicas to 6 for the launch", "user": user, "body": "",
			"head":  map[string]any{"ref": "launch-replicas", "sha": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "repo": repo, "user": user},
			"base":  map[string]any{"ref": "main", "sha": "9049f1265b7d61be4a8904a9a27120d2064dab3b", "repo": repo, "user": user},
			"draft": false, "merged": false, "commits": 1, "additions": 3, "deletions": 1, "changed_files": 1,
			"labels": []any{}, "requested_reviewers": []any{}, "created_at": "2026-11-22T12:00:00Z",
		},
		"repository":   repo,
		"sender":       user,
		"installation": map[string]any{"id": 2311213, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMjMxMTIxMw=="},
	}
	base, _ := json.Marshal(ev)
	pad := max(size-len(base), 0)
	line := "Parley-Intent: scale for launch traffic\nParley-Motivation: load test shows p99 at 80% CPU\n"
	body := strings.Repeat(line, pad/len(line)+1)[:pad]
	ev["pull_request"].(map[string]any)["body"] = body
	b, _ := json.Marshal(ev)
	return b
}

func runRate(ctx context.Context, cfg config) (result, error) {
	res := result{Rate: cfg.Rate, Other: map[int]int{}}
	st, cleanup, err := cfg.Open(ctx)
	if err != nil {
		return res, err
	}
	defer func() {
		_ = st.Close()
		cleanup()
	}()

	secret, err := webhooks.NewSecret("bench-secret")
	if err != nil {
		return res, err
	}
	logger := slog.New(slog.DiscardHandler)
	var notify func()
	var poolDone chan error
	poolCtx, stopPool := context.WithCancel(ctx)
	defer stopPool()
	if cfg.Workers > 0 {
		noop := webhooks.HandlerFunc(func(context.Context, store.Delivery) error { return nil })
		pool, err := webhooks.NewPool(webhooks.PoolConfig{
			Queue: st, Workers: cfg.Workers, Name: "bench", Logger: logger,
			Handlers: map[webhooks.Route]webhooks.Handler{{Source: store.SourceGitHub, Event: "pull_request"}: noop},
		})
		if err != nil {
			return res, err
		}
		notify = pool.Notify
		poolDone = make(chan error, 1)
		go func() { poolDone <- pool.Run(poolCtx) }()
	}
	rcv, err := webhooks.NewReceiver(webhooks.ReceiverConfig{Store: st, Secrets: []webhooks.Secret{secret}, Logger: logger, Notify: notify})
	if err != nil {
		return res, err
	}
	mux := http.NewServeMux()
	mux.Handle(webhooks.GitHubPath, rcv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-serveDone
	}()

	client := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns: cfg.MaxInFlight, MaxIdleConnsPerHost: cfg.MaxInFlight,
			DisableCompression: true, IdleConnTimeout: 30 * time.Second,
		},
	}
	defer client.CloseIdleConnections()

	body := payload(cfg.BodyBytes)
	// Each delivery's body is its own, as GitHub's are: the store refuses a body it already
	// holds under another delivery ID. The signature is computed as the request is sent.
	bodyOf := func(id string) ([]byte, string) {
		b := append([]byte(`{"bench_delivery":"`+id+`",`), body[1:]...)
		return b, webhooks.Sign(secret, b)
	}
	url := "http://" + ln.Addr().String() + webhooks.GitHubPath
	n := min(int(float64(cfg.Rate)*cfg.Duration.Seconds()), cfg.MaxRequests)
	interval := time.Second / time.Duration(cfg.Rate)
	ids := make([]string, n)
	lat := make([]time.Duration, n)
	svc := make([]time.Duration, n)
	codes := make([]int, n)
	sem := make(chan struct{}, cfg.MaxInFlight)
	var wg sync.WaitGroup

	// Warm the connection pool and the store so the first requests do not pay for dialing and
	// page-cache misses; warm-up deliveries are not counted.
	for i := range min(32, n) {
		id := fmt.Sprintf("warmup-%d", i)
		b, sig := bodyOf(id)
		_, _ = send(client, url, b, sig, id)
	}

	statsOf := func() store.CheckpointStats {
		if c, ok := st.(checkpointCounter); ok {
			return c.CheckpointStats()
		}
		return store.CheckpointStats{Checkpoints: -1, Rewinds: -1}
	}
	before := statsOf()
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		ids[i] = fmt.Sprintf("bench-%d-%06d", cfg.Rate, i)
		wg.Go(func() {
			defer func() { <-sem }()
			b, sig := bodyOf(ids[i])
			sent := time.Now()
			code, err := send(client, url, b, sig, ids[i])
			now := time.Now()
			lat[i], svc[i] = now.Sub(due), now.Sub(sent)
			if err != nil {
				code = -1
			}
			codes[i] = code
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	after := statsOf()
	res.Checkpoints, res.Rewinds = after.Checkpoints-before.Checkpoints, after.Rewinds-before.Rewinds
	if before.Checkpoints < 0 || after.Checkpoints < 0 {
		res.Checkpoints = -1
	}
	if before.Rewinds < 0 || after.Rewinds < 0 {
		res.Rewinds = -1
	}
	// The longest rewind since Open: the warm-up before the window rewinds nothing.
	res.LongestRewind = after.LongestRewind
	res.Sent = n

	for i, c := range codes {
		switch c {
		case http.StatusAccepted:
			res.Accepted++
			if _, err := st.Get(ctx, store.Key{Source: store.SourceGitHub, ID: ids[i]}); err != nil {
				res.Lost++
			} else {
				res.Stored++
			}
		case -1:
			res.Errors++
		default:
			res.Other[c]++
		}
	}
	slices.Sort(lat)
	slices.Sort(svc)
	res.Latencies, res.Service = lat, svc
	stopPool()
	if poolDone != nil {
		if err := <-poolDone; err != nil {
			return res, err
		}
	}
	return res, nil
}

func send(client *http.Client, url string, body []byte, sig, id string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhooks.HeaderEvent, "pull_request")
	req.Header.Set(webhooks.HeaderDelivery, id)
	req.Header.Set(webhooks.HeaderSignature, sig)
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}
