// Command attack measures parley serve under a flood from clients without credentials, side by
// side with the same valid load and no flood: valid GitHub deliveries at a steady rate (each body
// its own, signed; every other one through a reverse proxy parley trusts, PARLEY_TRUSTED_PROXIES),
// and, in an attacked run, at the same time the attacks -attacks names (all by default):
//
//   - wrongsig: wrong signatures on /webhooks/github, as fast as 8 connections go;
//   - sameaddr: wrong signatures from the valid sender's own address, interleaved with its valid
//     deliveries (2 connections);
//   - proxied: wrong signatures through the trusted proxy, from an address of their own (2
//     connections), interleaved with the valid deliveries the proxy carries;
//   - bigbody: 24 MiB bodies sent whole under a wrong signature, 16 connections from each of 4
//     addresses (issue 34's 64 x 24 MiB), each sending again as soon as it is answered;
//   - huge: declared bodies, Content-Length 26214400, a few bytes, then silence, from 4 addresses
//     (each reopens what the server closes);
//   - slow: bodies at one byte a second;
//   - idle: connections that send nothing;
//   - tokens: wrong agent tokens on /v1/proposals;
//   - bigmap: admission reviews, with the API server's token, of a Deployment whose nodeSelector
//     has -bigmap-keys keys (issue 34: 90,000 keys, 1.4 MB, cost 21 s of CPU each), 2 connections
//     back to back;
//   - bigplan: plans of -plan-resources resources on /v1/plans with a valid agent token (issue 34:
//     300,000 resources peaked at 1.2 GiB), one connection back to back;
//   - admtokens: wrong bearer tokens on the admission listener, 4 connections;
//   - deeptf: GitHub's signed pull_request deliveries, two a second, of a pull request adding a
//     Terraform file of 170,000 nested blocks (issue 34's 200,000 ended the process with Go's fatal
//     stack overflow); the report gives the check run serve concluded for it.
//
// Every run also sends the busy cluster's admission reviews (internal/busycluster: the demo
// repository and 1,000 Deployments, served by the fake GitHub; half HPA scales, accepted and
// recorded, 3 in 10 cost-optimizer scale-downs, denied, 2 in 10 ConfigMap edits no field block
// covers) at -admission-rate a second to the admission webhook on its own TLS listener over one
// HTTP/2 connection, as the API server calls it, and checks every answer against the policy's
// decision: the report gives their latency, how many were answered unjudged (fail open) and how
// many wrongly.
//
// It reports, for each run, the admission reviews' answers (above), the valid deliveries acknowledged and found in the store afterwards
// (direct and through the proxy), the acknowledgement latency percentiles, the server's peak
// resident memory (VmHWM of the parley serve process) and its settled memory (VmRSS -settle after
// the run's load stopped), and /healthz on the operations listener, polled every 100 ms. With
// -each, every attack also runs alone.
//
//	go build -o /tmp/parley ./cmd/parley
//	go run ./bench/attack -parley /tmp/parley -rate 100 -admission-rate 100 -duration 60s -each
//
// With -pprof ADDR, parley serve serves Go's profiles there (its pprof_listen), to see where an
// attack's cost goes: go tool pprof 'http://ADDR/debug/pprof/profile?seconds=6' during the
// attacked run.
//
// The attackers run in a process of their own at nice 19 (child.go): on one machine they stand
// for clients elsewhere, whose CPU is not the server's; the valid senders, the proxy and parley
// serve run at the normal priority.
//
// Each holding attacker pauses 100 ms before it reconnects, so that on one machine the load
// generator does not take the CPU the server needs; the wrong-signature and wrong-token senders
// do not pause.
//
// Everything runs on loopback: the server listens on 127.0.0.1, the valid sender connects from
// 127.0.0.1, the proxy from 127.0.0.10, each kind of attacker from its own 127.0.0.x address
// (Linux routes all of 127/8 to the loopback device), so the per-client caps apply to the
// attackers and not to the valid sender, except for sameaddr, which shares its address on
// purpose. serve spools unauthenticated bodies to a directory of the run's (TMPDIR).
// Every run is bounded by -duration; every request has a timeout.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
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

	"github.com/parleyhq/parley/bench/internal/admissionrig"
	"github.com/parleyhq/parley/bench/internal/procstat"
	"github.com/parleyhq/parley/internal/busycluster"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/store"
)

// attacks are the attacks -attacks may name, in the order they are reported.
var attacks = []string{"wrongsig", "sameaddr", "proxied", "bigbody", "huge", "slow", "idle", "tokens", "bigmap", "bigplan", "admtokens", "deeptf"}

func main() {
	if os.Getenv(childEnv) != "" {
		if err := childMain(); err != nil {
			fmt.Fprintln(os.Stderr, "attack (attackers):", err)
			os.Exit(1)
		}
		return
	}
	parley := flag.String("parley", "", "the parley binary to run (go build -o /tmp/parley ./cmd/parley)")
	rate := flag.Int("rate", 100, "valid deliveries per second")
	duration := flag.Duration("duration", 60*time.Second, "length of each run (at most 10m)")
	settle := flag.Duration("settle", 10*time.Second, "how long after a run's load stops its settled memory is read")
	only := flag.String("attacks", "all", "comma-separated attacks of the attacked run: "+strings.Join(attacks, ", ")+", or all")
	each := flag.Bool("each", false, "also run each attack alone")
	serveLog = flag.String("serve-log", "", "append parley serve's log (at -log-level) to this file")
	flag.StringVar(&logLevel, "log-level", "error", "parley serve's log_level")
	flag.StringVar(&pprofListen, "pprof", "", "serve Go's profiles of parley serve on this address (its pprof_listen), e.g. 127.0.0.1:6060, for\n"+
		"go tool pprof http://127.0.0.1:6060/debug/pprof/profile?seconds=8 during a run")
	flag.IntVar(&sizes.admissionRate, "admission-rate", 100, "valid admission reviews per second")
	flag.IntVar(&sizes.bigMapKeys, "bigmap-keys", 90_000, "keys of the bigmap attack's nodeSelector")
	flag.IntVar(&sizes.planResources, "plan-resources", 300_000, "resources of the bigplan attack's plan")
	flag.Parse()
	chosen := attacks
	if *only != "all" {
		chosen = strings.Split(*only, ",")
		for _, a := range chosen {
			if !slices.Contains(attacks, a) {
				fmt.Fprintf(os.Stderr, "attack: unknown attack %q (want %s)\n", a, strings.Join(attacks, ", "))
				os.Exit(2)
			}
		}
	}
	if *parley == "" || *rate < 1 || *duration <= 0 || *duration > 10*time.Minute || *settle < 0 ||
		sizes.admissionRate < 1 || sizes.admissionRate > 2000 || sizes.bigMapKeys < 1 || sizes.planResources < 1 {
		fmt.Fprintln(os.Stderr, "usage: attack -parley PATH [-rate N] [-admission-rate 1..2000] [-duration D<=10m] [-settle D] [-attacks a,b|all] [-each] [-bigmap-keys N] [-plan-resources N]")
		os.Exit(2)
	}
	shared, err := os.MkdirTemp("", "parley-attack-cluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "attack:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(shared)
	fmt.Fprintln(os.Stderr, "building the busy repository ...")
	cl, err := newCluster(shared)
	if err != nil {
		fmt.Fprintln(os.Stderr, "attack:", err)
		os.Exit(1)
	}
	defer cl.close()
	if slices.Contains(chosen, "bigmap") {
		bigMapBody()
	}
	if slices.Contains(chosen, "bigplan") {
		bigPlanBody()
	}
	runs := [][]string{nil, chosen}
	if *each && len(chosen) > 1 {
		for _, a := range chosen {
			runs = append(runs, []string{a})
		}
	}
	var results []*result
	for _, kinds := range runs {
		fmt.Fprintf(os.Stderr, "run %q ...\n", kinds)
		r, err := run(*parley, cl, *rate, *duration, *settle, kinds)
		if err != nil {
			fmt.Fprintln(os.Stderr, "attack:", err)
			cl.close()
			os.Exit(1)
		}
		results = append(results, r)
	}
	report(os.Stdout, *rate, *duration, *settle, results)
}

// serveLog and logLevel are where parley serve's log goes, and how much of it; pprofListen, set,
// is parley serve's pprof_listen, to profile what an attack costs it.
var (
	serveLog    *string
	logLevel    string
	pprofListen string
)

// sizes are the flags that size the load and the attacks.
var sizes struct{ admissionRate, bigMapKeys, planResources int }

type result struct {
	kinds                  []string
	sent, accepted, stored int
	proxiedSent            int
	proxiedStored          int
	other                  map[int]int
	lat                    []time.Duration
	peakRSS, settledRSS    int64   // KiB
	cpu                    float64 // seconds of CPU serve used during the load
	health, healthFail     int
	healthMax              time.Duration
	answers                map[string]map[int]int // by attack, the status codes its requests got
	hugeOpened, slowOpened atomic.Int64
	idleOpened, refused503 atomic.Int64
	attackMu               sync.Mutex
	admission              *admissionResult
	slowest                map[string]time.Duration // by attack, its slowest answer
	deepCheck              string                   // the deeptf pull request's check run, as serve left it
}

// noteSlowest keeps the slowest answer an attack got.
func (r *result) noteSlowest(kind string, d time.Duration) {
	r.attackMu.Lock()
	defer r.attackMu.Unlock()
	if r.slowest == nil {
		r.slowest = map[string]time.Duration{}
	}
	r.slowest[kind] = max(r.slowest[kind], d)
}

// name is the run's name in the report.
func (r *result) name() string {
	switch {
	case len(r.kinds) == 0:
		return "quiet"
	case len(r.kinds) == len(attacks):
		return "all attacks"
	}
	return strings.Join(r.kinds, "+")
}

// Addresses on loopback: the valid sender, the proxy parley trusts, and each attacker's own.
const (
	validAddr   = 1
	proxyAddr   = 10
	proxiedAddr = 11 // the attacker behind the proxy
)

func run(parley string, cl *cluster, rate int, duration, settle time.Duration, kinds []string) (*result, error) {
	dir, err := os.MkdirTemp("", "parley-attack-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	spool := filepath.Join(dir, "tmp")
	if err := os.Mkdir(spool, 0o700); err != nil {
		return nil, err
	}
	addr, opsAddr := freePort(), freePort()
	sf, err := writeServe(parley, dir, cl, addr, opsAddr)
	if err != nil {
		return nil, err
	}
	dbPath := sf.store
	cmd := exec.Command(parley, "serve", "--config", sf.config)
	cmd.Env = append(os.Environ(), "PARLEY_PRIVATE_KEY_FILE="+sf.keyFile, "TMPDIR="+spool)
	cmd.Stderr = io.Discard
	if *serveLog != "" {
		f, err := os.OpenFile(*serveLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		fmt.Fprintf(f, "\n== run %q\n", kinds)
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }()
	if err := waitHealthy("http://"+opsAddr+"/healthz", 30*time.Second); err != nil {
		return nil, err
	}
	admClient := admissionrig.Client(sf.pool, 10*time.Second)
	defer admClient.CloseIdleConnections()
	admURL := "https://" + sf.admissionAddr + "/admission/prod"
	if err := warmUp(admClient, admURL, sf.admissionToken, time.Minute); err != nil {
		return nil, err
	}
	// The reverse proxy in front of parley, as an Ingress controller: it appends the client's
	// address to X-Forwarded-For and connects from the address parley trusts.
	target, _ := url.Parse("http://" + addr)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{DialContext: from(proxyAddr).DialContext, MaxIdleConnsPerHost: 64}
	rp.ErrorLog = log.New(io.Discard, "", 0)
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	proxy := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = proxy.Serve(pln) }()
	defer proxy.Close()

	res := &result{kinds: kinds, other: map[int]int{}, answers: map[string]map[int]int{}}
	ctx, stop := context.WithTimeout(context.Background(), duration)
	defer stop()
	var wg sync.WaitGroup
	cpu0 := procstat.CPUSeconds(cmd.Process.Pid)
	wg.Go(func() { res.peakRSS = watchRSS(ctx, cmd.Process.Pid) })
	wg.Go(func() { probe(ctx, "http://"+opsAddr+"/healthz", res) })
	var waitAttackers func() error
	if len(kinds) > 0 {
		waitAttackers, err = attackers(orders{Kinds: kinds, Addr: addr, Proxy: pln.Addr().String(), AdmURL: admURL, AdmToken: sf.admissionToken,
			CAFile: filepath.Join(dir, "ca.crt"), AgentToken: sf.agentToken, PullRequest: cl.pullRequest, Until: time.Now().Add(duration), BigMapKeys: sizes.bigMapKeys, PlanResources: sizes.planResources}, res)
		if err != nil {
			return nil, err
		}
	}
	wg.Go(func() { res.admission = admissions(ctx, admClient, admURL, sf.admissionToken, sizes.admissionRate) })
	ids := valid(ctx, addr, pln.Addr().String(), rate, duration, res)
	wg.Wait()
	res.cpu = procstat.CPUSeconds(cmd.Process.Pid) - cpu0
	if waitAttackers != nil {
		if err := waitAttackers(); err != nil {
			return nil, err
		}
	}
	res.peakRSS = max(res.peakRSS, vmHWM(cmd.Process.Pid))
	// The load has stopped: what the server holds once it settles, with /healthz still polled.
	settled, stopSettle := context.WithTimeout(context.Background(), settle)
	probe(settled, "http://"+opsAddr+"/healthz", res)
	stopSettle()
	res.settledRSS = procstat.Status(cmd.Process.Pid, "VmRSS:")
	if slices.Contains(kinds, "deeptf") {
		res.deepCheck = "no check run"
		for _, c := range cl.gh.CheckRuns("acme/infra") {
			if c.HeadSHA == cl.deepHead {
				res.deepCheck = fmt.Sprintf("check run %s %s: %s", c.Status, c.Conclusion, c.Title)
			}
		}
	}

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
			if proxiedID(id) {
				res.proxiedStored++
			}
		}
	}
	return res, nil
}

// proxiedID reports whether the valid delivery id was sent through the proxy: every other one.
func proxiedID(id string) bool { return id[len(id)-1]%2 == 1 }

// from dials from 127.0.0.last.
func from(last byte) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, last)}, Timeout: 5 * time.Second}
}

// valid sends rate deliveries a second for duration, open loop (latency counted from when each
// was due), every other one through the proxy, and returns the IDs acknowledged 202.
func valid(ctx context.Context, addr, proxyAddr string, rate int, duration time.Duration, res *result) []string {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext:  from(validAddr).DialContext,
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
		to := addr
		if proxiedID(ids[i]) {
			to = proxyAddr
			res.proxiedSent++
		}
		wg.Go(func() {
			body := []byte(`{"zen":"` + ids[i] + `","hook_id":1,"filler":"` + filler + `"}`)
			req, _ := http.NewRequest(http.MethodPost, "http://"+to+webhooks.GitHubPath, bytes.NewReader(body))
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

// targets is where the attackers send.
type targets struct {
	addr, proxy      string // the GitHub webhook listener, directly and through the proxy
	admURL, admToken string // the admission webhook and the API server's token
	pool             *x509.CertPool
	agentToken       string // a valid agent token, for /v1/plans
	pullRequest      []byte // GitHub's pull_request delivery of the deep Terraform
}

// attack starts the attacker kind; it stops when ctx ends.
func attack(ctx context.Context, wg *sync.WaitGroup, kind string, tg targets, res *result) {
	addr, proxyAddr := tg.addr, tg.proxy
	count := func(code int) {
		res.attackMu.Lock()
		if res.answers[kind] == nil {
			res.answers[kind] = map[int]int{}
		}
		res.answers[kind][code]++
		res.attackMu.Unlock()
	}
	// exchange sends req and counts its answer: its status, or -1 for a connection closed while
	// sending (a 503 answered before the body was read closes it while the client still sends).
	exchange := func(c *http.Client, req *http.Request) {
		resp, err := c.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				count(-1)
			}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		count(resp.StatusCode)
	}
	// forge sends wrong signatures from last to to, as fast as conns connections go.
	forge := func(last byte, to string, conns int, body []byte) {
		client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: from(last).DialContext, MaxIdleConnsPerHost: conns}}
		for range conns {
			wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+to+webhooks.GitHubPath, bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set(webhooks.HeaderEvent, "push")
					req.Header.Set(webhooks.HeaderDelivery, "forged")
					req.Header.Set(webhooks.HeaderSignature, "sha256="+strings.Repeat("0", 64))
					exchange(client, req)
				}
			})
		}
	}
	switch kind {
	case "wrongsig":
		forge(2, addr, 8, []byte(`{"zen":"forged"}`))
	case "sameaddr":
		forge(validAddr, addr, 2, []byte(`{"zen":"forged from the valid sender's address"}`))
	case "proxied":
		forge(proxiedAddr, proxyAddr, 2, []byte(`{"zen":"forged through the proxy"}`))
	case "bigbody":
		big := bytes.Repeat([]byte("x"), 24<<20)
		for last := byte(12); last <= 15; last++ {
			forge(last, addr, 16, big)
		}
	case "tokens":
		tokClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: from(9).DialContext, MaxIdleConnsPerHost: 4}}
		for range 4 {
			wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/proposals", strings.NewReader(`{"claims":[]}`))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", fmt.Sprintf("Bearer parley_%016x_guess%d", i, i))
					exchange(tokClient, req)
				}
			})
		}
	case "bigmap":
		review := bigMapBody()
		c := admissionrig.Client(tg.pool, 10*time.Second)
		for range 2 {
			wg.Go(func() {
				defer c.CloseIdleConnections()
				for ctx.Err() == nil {
					a, err := admissionrig.Send(c, tg.admURL, tg.admToken, review, "bigmap-7", time.Now())
					switch {
					case err != nil:
						if ctx.Err() == nil {
							count(-1)
						}
					case a.Unjudged():
						count(1) // allowed unjudged
					case a.Response.Allowed:
						count(http.StatusOK)
					case a.Response.Result != nil:
						count(int(a.Response.Result.Code))
					default:
						count(http.StatusForbidden)
					}
					res.noteSlowest(kind, a.Latency)
				}
			})
		}
	case "bigplan":
		plan := bigPlanBody()
		c := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: from(16).DialContext}}
		wg.Go(func() {
			defer c.CloseIdleConnections()
			for ctx.Err() == nil {
				start := time.Now()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/v1/plans?repository=acme/infra", bytes.NewReader(plan))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tg.agentToken)
				exchange(c, req)
				res.noteSlowest(kind, time.Since(start))
			}
		})
	case "deeptf":
		secret, _ := webhooks.NewSecret("hook")
		c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: from(17).DialContext}}
		wg.Go(func() {
			defer c.CloseIdleConnections()
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				// Each delivery its own body, as each push to the branch makes one: the same body
				// again would be stored once and judged once.
				body := fmt.Appendf(slices.Clip(bytes.TrimSuffix(bytes.TrimSpace(tg.pullRequest), []byte("}"))), `,"bench_push":%d}`, i) // Clip: never into tg.pullRequest
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+webhooks.GitHubPath, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(webhooks.HeaderEvent, "pull_request")
				req.Header.Set(webhooks.HeaderDelivery, fmt.Sprintf("deeptf-%d", i))
				req.Header.Set(webhooks.HeaderSignature, webhooks.Sign(secret, body))
				exchange(c, req)
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		})
	case "admtokens":
		c := admissionrig.Client(tg.pool, 10*time.Second)
		for range 4 {
			wg.Go(func() {
				defer c.CloseIdleConnections()
				for i := 0; ctx.Err() == nil; i++ {
					_, err := admissionrig.Send(c, tg.admURL, fmt.Sprintf("guess-%d", i), busycluster.Review(i+1), "x", time.Now())
					code := -1
					if err != nil {
						if _, after, ok := strings.Cut(err.Error(), " answered "); ok {
							code, _ = strconv.Atoi(strings.Fields(after)[0])
						}
					}
					if ctx.Err() == nil {
						count(code)
					}
				}
			})
		}
	case "huge":
		huge := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: parley\r\nContent-Type: application/json\r\n"+
			"X-GitHub-Event: push\r\nX-GitHub-Delivery: huge\r\nX-Hub-Signature-256: sha256=%s\r\nContent-Length: %d\r\n\r\n{\"a\":",
			webhooks.GitHubPath, strings.Repeat("0", 64), webhooks.MaxBodyBytes)
		for last := byte(3); last <= 6; last++ {
			for range 80 { // more than the per-client cap
				wg.Go(func() { hold(ctx, from(last), addr, &res.hugeOpened, huge, false, res) })
			}
		}
	case "slow":
		slow := fmt.Sprintf("POST /events/flux HTTP/1.1\r\nHost: parley\r\nContent-Type: application/json\r\n"+
			"X-Signature: sha256=%s\r\nContent-Length: 100000\r\n\r\n", strings.Repeat("0", 64))
		for range 80 {
			wg.Go(func() { hold(ctx, from(7), addr, &res.slowOpened, slow, true, res) })
		}
	case "idle":
		for range 80 {
			wg.Go(func() { hold(ctx, from(8), addr, &res.idleOpened, "", false, res) })
		}
	}
}

// hold opens raw connections that hold: it sends start, then nothing (or, with drip, a byte a
// second) until the server closes the connection or ctx ends, and opens the next.
func hold(ctx context.Context, d *net.Dialer, addr string, opened *atomic.Int64, start string, drip bool, res *result) {
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
		peak = max(peak, procstat.Status(pid, "VmRSS:"))
		select {
		case <-ctx.Done():
			return peak
		case <-t.C:
		}
	}
}

func vmHWM(pid int) int64 { return procstat.Status(pid, "VmHWM:") }

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

func report(w io.Writer, rate int, duration, settle time.Duration, rs []*result) {
	fmt.Fprintf(w, "valid GitHub deliveries at %d/s for %s (every other one through a trusted reverse proxy), 25 KB bodies, SQLite store (fsync on commit); settled RSS read %s after the load stopped\n\n", rate, duration, settle)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "run\tsent\tacked 202\tstored\tvia proxy stored\tother\tack p50\tack p99\tack max\tpeak RSS\tsettled RSS\t/healthz ok\t/healthz max\tserve CPU s")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d/%d\t%v\t%s\t%s\t%s\t%d MiB\t%d MiB\t%d/%d\t%s\t%.1f\n", r.name(), r.sent, r.accepted, r.stored, r.proxiedStored, r.proxiedSent, r.other,
			pct(r.lat, .50).Round(100*time.Microsecond), pct(r.lat, .99).Round(100*time.Microsecond), pct(r.lat, 1).Round(100*time.Microsecond),
			r.peakRSS/1024, r.settledRSS/1024, r.health-r.healthFail, r.health, r.healthMax.Round(100*time.Microsecond), r.cpu)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nadmission reviews at %d/s (the busy cluster's mix, deny mode, one HTTP/2 connection), answers checked against the policy's decisions:\n\n", sizes.admissionRate)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "run\treviews\tp50\tp99\tmax\tunjudged (fail open)\twrong\terrors")
	for _, r := range rs {
		a := r.admission
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\n", r.name(), a.sent, pct(a.lat, .50).Round(10*time.Microsecond), pct(a.lat, .99).Round(10*time.Microsecond),
			pct(a.lat, 1).Round(10*time.Microsecond), a.unjudged, a.wrong, a.errors)
	}
	_ = tw.Flush()
	for _, r := range rs {
		if a := r.admission; a.firstError != "" || a.firstWrong != "" {
			fmt.Fprintf(w, "%s: first admission error %q, first wrong answer %q\n", r.name(), a.firstError, a.firstWrong)
		}
	}
	for _, r := range rs {
		if len(r.kinds) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", r.name())
		for _, k := range attacks {
			if a, ok := r.answers[k]; ok {
				fmt.Fprintf(w, "  %s answered %v (-1: connection closed while sending)", k, a)
				if d, ok := r.slowest[k]; ok {
					fmt.Fprintf(w, ", slowest %s", d.Round(time.Millisecond))
				}
				if k == "deeptf" {
					fmt.Fprintf(w, "; %s", r.deepCheck)
				}
				fmt.Fprintln(w)
			}
		}
		if r.hugeOpened.Load()+r.slowOpened.Load()+r.idleOpened.Load() > 0 {
			fmt.Fprintf(w, "  connections opened: huge declared bodies %d, slow bodies %d, idle %d; answered 503 at accept: %d\n",
				r.hugeOpened.Load(), r.slowOpened.Load(), r.idleOpened.Load(), r.refused503.Load())
		}
	}
}
