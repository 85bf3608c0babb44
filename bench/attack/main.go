// Command attack measures parley serve under a flood from clients without credentials, side by
// side with the same valid load and no flood: valid GitHub deliveries at a steady rate (each body
// its own, signed), and, in the attacked run, at the same time
//
//   - wrong signatures on /webhooks/github, as fast as 8 connections go;
//   - huge declared bodies: Content-Length 26214400, a few bytes, then silence, from 4 addresses
//     (each reopens what the server closes);
//   - slow bodies: one byte a second;
//   - idle connections: connected, sending nothing;
//   - wrong agent tokens on /v1/proposals.
//
// It reports, for each run, the valid deliveries acknowledged and found in the store afterwards,
// the acknowledgement latency percentiles, the server's peak resident memory (VmHWM of the
// parley serve process), and /healthz on the operations listener, polled every 100 ms.
//
//	go build -o /tmp/parley ./cmd/parley
//	go run ./bench/attack -parley /tmp/parley -rate 100 -duration 60s
//
// Each holding attacker pauses 100 ms before it reconnects, so that on one machine the load
// generator does not take the CPU the server needs; the wrong-signature and wrong-token senders
// do not pause.
//
// Everything runs on loopback: the server listens on 127.0.0.1, the valid sender connects from
// 127.0.0.1, each kind of attacker from its own 127.0.0.x address (Linux routes all of 127/8 to the
// loopback device), so the per-client caps apply to the attackers and not to the valid sender.
// Every run is bounded by -duration; every request has a timeout.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/store"
)

func main() {
	parley := flag.String("parley", "", "the parley binary to run (go build -o /tmp/parley ./cmd/parley)")
	rate := flag.Int("rate", 100, "valid deliveries per second")
	duration := flag.Duration("duration", 60*time.Second, "length of each run (at most 10m)")
	flag.Parse()
	if *parley == "" || *rate < 1 || *duration <= 0 || *duration > 10*time.Minute {
		fmt.Fprintln(os.Stderr, "usage: attack -parley PATH [-rate N] [-duration D<=10m]")
		os.Exit(2)
	}
	var results []*result
	for _, attacked := range []bool{false, true} {
		r, err := run(*parley, *rate, *duration, attacked)
		if err != nil {
			fmt.Fprintln(os.Stderr, "attack:", err)
			os.Exit(1)
		}
		results = append(results, r)
	}
	report(os.Stdout, *rate, *duration, results)
}

type result struct {
	attacked               bool
	sent, accepted, stored int
	other                  map[int]int
	lat                    []time.Duration
	peakRSS                int64 // KiB
	health, healthFail     int
	healthMax              time.Duration
	wrongSig               map[int]int
	tokens                 map[int]int
	hugeOpened, slowOpened atomic.Int64
	idleOpened, refused503 atomic.Int64
	attackMu               sync.Mutex
}

func run(parley string, rate int, duration time.Duration, attacked bool) (*result, error) {
	dir, err := os.MkdirTemp("", "parley-attack-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	keyFile := filepath.Join(dir, "app.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return nil, err
	}
	addr, opsAddr := freePort(), freePort()
	dbPath := filepath.Join(dir, "parley.db")
	cmd := exec.Command(parley, "serve")
	cmd.Env = append(os.Environ(), "PARLEY_APP_ID=1", "PARLEY_PRIVATE_KEY_FILE="+keyFile, "PARLEY_WEBHOOK_SECRETS=hook",
		"PARLEY_LISTEN="+addr, "PARLEY_METRICS_LISTEN="+opsAddr, "PARLEY_STORE="+dbPath, "PARLEY_LOG_LEVEL=error",
		"PARLEY_GITHUB_URL=http://127.0.0.1:9/")
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }()
	if err := waitHealthy("http://"+opsAddr+"/healthz", 30*time.Second); err != nil {
		return nil, err
	}

	res := &result{attacked: attacked, other: map[int]int{}, wrongSig: map[int]int{}, tokens: map[int]int{}}
	ctx, stop := context.WithTimeout(context.Background(), duration)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { res.peakRSS = watchRSS(ctx, cmd.Process.Pid) })
	wg.Go(func() { probe(ctx, "http://"+opsAddr+"/healthz", res) })
	if attacked {
		attack(ctx, &wg, addr, res)
	}
	ids := valid(ctx, addr, rate, duration, res)
	wg.Wait()
	res.peakRSS = max(res.peakRSS, vmHWM(cmd.Process.Pid))

	// Stop the server (SIGTERM drains) and look every acknowledged delivery up in its store.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _, _ = cmd.Process.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	st, err := store.Open(context.Background(), dbPath, store.Options{})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	for _, id := range ids {
		if _, err := st.Get(context.Background(), store.Key{Source: store.SourceGitHub, ID: id}); err == nil {
			res.stored++
		}
	}
	return res, nil
}

// valid sends rate deliveries a second for duration, open loop (latency counted from when each
// was due), and returns the IDs acknowledged 202.
func valid(ctx context.Context, addr string, rate int, duration time.Duration, res *result) []string {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext:  (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}}).DialContext,
		MaxIdleConns: 64, MaxIdleConnsPerHost: 64, MaxConnsPerHost: 48}}
	defer client.CloseIdleConnections()
	secret, _ := webhooks.NewSecret("hook")
	filler := strings.Repeat("x", 24<<10) // about GitHub's typical 25 KB pull_request body
	n := int(float64(rate) * duration.Seconds())
	interval := time.Second / time.Duration(rate)
	lat := make([]time.Duration, n)
	codes := make([]int, n)
	ids := make([]string, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		ids[i] = fmt.Sprintf("valid-%07d", i)
		wg.Go(func() {
			body := []byte(`{"zen":"` + ids[i] + `","hook_id":1,"filler":"` + filler + `"}`)
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+webhooks.GitHubPath, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(webhooks.HeaderEvent, "ping")
			req.Header.Set(webhooks.HeaderDelivery, ids[i])
			req.Header.Set(webhooks.HeaderSignature, webhooks.Sign(secret, body))
			resp, err := client.Do(req)
			lat[i] = time.Since(due)
			if err != nil {
				codes[i] = -1
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	var acked []string
	for i, c := range codes {
		if c == http.StatusAccepted {
			acked = append(acked, ids[i])
		} else {
			res.other[c]++
		}
	}
	res.sent, res.accepted = n, len(acked)
	slices.Sort(lat)
	res.lat = lat
	return acked
}

// attack starts every attacker; each stops when ctx ends.
func attack(ctx context.Context, wg *sync.WaitGroup, addr string, res *result) {
	from := func(last byte) *net.Dialer {
		return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, last)}, Timeout: 5 * time.Second}
	}
	count := func(m map[int]int, code int) { res.attackMu.Lock(); m[code]++; res.attackMu.Unlock() }
	// Wrong signatures, as fast as 8 connections go.
	sigClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: from(2).DialContext, MaxIdleConnsPerHost: 8}}
	for range 8 {
		wg.Go(func() {
			body := []byte(`{"zen":"forged"}`)
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+webhooks.GitHubPath, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(webhooks.HeaderEvent, "push")
				req.Header.Set(webhooks.HeaderDelivery, "forged")
				req.Header.Set(webhooks.HeaderSignature, "sha256="+strings.Repeat("0", 64))
				resp, err := sigClient.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				count(res.wrongSig, resp.StatusCode)
			}
		})
	}
	// Wrong agent tokens.
	tokClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: from(9).DialContext, MaxIdleConnsPerHost: 4}}
	for range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/proposals", strings.NewReader(`{"claims":[]}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", fmt.Sprintf("Bearer parley_%016x_guess%d", i, i))
				resp, err := tokClient.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				count(res.tokens, resp.StatusCode)
			}
		})
	}
	// Raw connections that hold: huge declared bodies (4 addresses), slow bodies, idle ones.
	hold := func(d *net.Dialer, opened *atomic.Int64, start string, drip bool) {
		for ctx.Err() == nil {
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			opened.Add(1)
			_, _ = io.WriteString(c, start)
			closed := make(chan struct{})
			go func() { // reads what the server answers; ends when it closes
				r := bufio.NewReader(c)
				if line, err := r.ReadString('\n'); err == nil && strings.Contains(line, " 503 ") {
					res.refused503.Add(1)
				}
				_, _ = io.Copy(io.Discard, r)
				close(closed)
			}()
			tick := time.NewTicker(time.Second)
		wait:
			for {
				select {
				case <-ctx.Done():
					break wait
				case <-closed:
					break wait
				case <-tick.C:
					if drip {
						_, _ = c.Write([]byte("x"))
					}
				}
			}
			tick.Stop()
			c.Close()
			<-closed
			// A short pause before the next connection: on a shared machine an attacker
			// spinning on refused connections would mostly measure the load generator.
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	huge := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: parley\r\nContent-Type: application/json\r\n"+
		"X-GitHub-Event: push\r\nX-GitHub-Delivery: huge\r\nX-Hub-Signature-256: sha256=%s\r\nContent-Length: %d\r\n\r\n{\"a\":",
		webhooks.GitHubPath, strings.Repeat("0", 64), webhooks.MaxBodyBytes)
	for last := byte(3); last <= 6; last++ {
		for range 80 { // more than the per-client cap
			wg.Go(func() { hold(from(last), &res.hugeOpened, huge, false) })
		}
	}
	slow := fmt.Sprintf("POST /events/flux HTTP/1.1\r\nHost: parley\r\nContent-Type: application/json\r\n"+
		"X-Signature: sha256=%s\r\nContent-Length: 100000\r\n\r\n", strings.Repeat("0", 64))
	for range 80 {
		wg.Go(func() { hold(from(7), &res.slowOpened, slow, true) })
	}
	for range 80 {
		wg.Go(func() { hold(from(8), &res.idleOpened, "", false) })
	}
}

// probe polls url every 100 ms until ctx ends.
func probe(ctx context.Context, url string, res *result) {
	client := &http.Client{Timeout: 2 * time.Second}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		resp, err := client.Get(url)
		d := time.Since(start)
		res.health++
		res.healthMax = max(res.healthMax, d)
		if err != nil {
			res.healthFail++
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			res.healthFail++
		}
	}
}

// watchRSS samples the process's resident memory every 250 ms and returns the peak, in KiB.
func watchRSS(ctx context.Context, pid int) int64 {
	var peak int64
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		peak = max(peak, procStatus(pid, "VmRSS:"))
		select {
		case <-ctx.Done():
			return peak
		case <-t.C:
		}
	}
}

func vmHWM(pid int) int64 { return procStatus(pid, "VmHWM:") }

func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitHealthy(url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("parley serve did not answer /healthz within " + within.String())
}

func pct(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	return lat[min(len(lat)-1, int(p*float64(len(lat))))]
}

func report(w io.Writer, rate int, duration time.Duration, rs []*result) {
	fmt.Fprintf(w, "valid GitHub deliveries at %d/s for %s, 25 KB bodies, SQLite store (fsync on commit)\n\n", rate, duration)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "run\tsent\tacked 202\tstored\tother\tack p50\tack p99\tack max\tpeak RSS\t/healthz ok\t/healthz max")
	for _, r := range rs {
		name := "no attack"
		if r.attacked {
			name = "attack"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%v\t%s\t%s\t%s\t%d MiB\t%d/%d\t%s\n", name, r.sent, r.accepted, r.stored, r.other,
			pct(r.lat, .50).Round(100*time.Microsecond), pct(r.lat, .99).Round(100*time.Microsecond), pct(r.lat, 1).Round(100*time.Microsecond),
			r.peakRSS/1024, r.health-r.healthFail, r.health, r.healthMax.Round(100*time.Microsecond))
	}
	_ = tw.Flush()
	for _, r := range rs {
		if !r.attacked {
			continue
		}
		fmt.Fprintf(w, "\nattack: wrong signatures answered %v; wrong tokens answered %v\n", r.wrongSig, r.tokens)
		fmt.Fprintf(w, "attack: connections opened: huge declared bodies %d, slow bodies %d, idle %d; answered 503 at accept: %d\n",
			r.hugeOpened.Load(), r.slowOpened.Load(), r.idleOpened.Load(), r.refused503.Load())
	}
}
