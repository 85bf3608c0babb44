package main

// The attackers run in a process of their own at the lowest CPU priority (nice 19): on one
// machine they stand for clients elsewhere, whose CPU is not the server's. Run in the same
// process at the same priority, the 24 MiB senders and the wrong-signature loops took most of the
// two cores this benchmark is measured on, so the report measured the load generator rather than
// what the attacks cost parley serve. The child gets its orders as JSON on standard input and
// answers with what its attackers were answered on standard output.

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// childEnv, set, makes this program the attackers' process.
const childEnv = "PARLEY_ATTACK_CHILD"

// orders is what the attackers' process is told.
type orders struct {
	Kinds         []string
	Addr, Proxy   string // the GitHub webhook listener, directly and through the proxy
	AdmURL        string
	AdmToken      string
	CAFile        string // the CA the admission listener's certificate chains to
	AgentToken    string
	PullRequest   []byte    // GitHub's pull_request delivery of the deep Terraform (deeptf)
	Until         time.Time // when the attack ends (the run's end, whenever the child is ready)
	BigMapKeys    int
	PlanResources int
}

// childReport is what the attackers' process answers.
type childReport struct {
	Answers                                        map[string]map[int]int
	Slowest                                        map[string]time.Duration
	HugeOpened, SlowOpened, IdleOpened, Refused503 int64
}

// attackers starts the attackers' process for o at nice 19 and returns a function that waits
// for its report and adds it to res.
func attackers(o orders, res *result) (wait func() error, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	in, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	// nice(1) sets the priority before the program starts, so every thread the Go runtime makes
	// has it (setpriority on a running process would reach only its first thread).
	cmd := exec.Command("nice", "-n", "19", self)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdin = bytes.NewReader(in)
	var out, stderr bytes.Buffer // read once Wait has returned
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the attackers: %w", err)
	}
	return func() error {
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("the attackers: %w: %s", err, stderr.String())
		}
		var r childReport
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			return fmt.Errorf("the attackers' report: %w: %s", err, stderr.String())
		}
		res.answers, res.slowest = r.Answers, r.Slowest
		res.hugeOpened.Store(r.HugeOpened)
		res.slowOpened.Store(r.SlowOpened)
		res.idleOpened.Store(r.IdleOpened)
		res.refused503.Store(r.Refused503)
		return nil
	}, nil
}

// childMain is the attackers' process: it reads its orders, attacks for their duration and
// prints its report.
func childMain() error {
	var o orders
	if err := json.NewDecoder(os.Stdin).Decode(&o); err != nil {
		return fmt.Errorf("orders: %w", err)
	}
	sizes.bigMapKeys, sizes.planResources = o.BigMapKeys, o.PlanResources
	pem, err := os.ReadFile(o.CAFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return errors.New("no CA certificate in " + filepath.Base(o.CAFile))
	}
	tg := targets{addr: o.Addr, proxy: o.Proxy, admURL: o.AdmURL, admToken: o.AdmToken, pool: pool, agentToken: o.AgentToken, pullRequest: o.PullRequest}
	res := &result{answers: map[string]map[int]int{}}
	for _, k := range o.Kinds { // the bodies are built before the attack starts
		switch k {
		case "bigmap":
			bigMapBody()
		case "bigplan":
			bigPlanBody()
		}
	}
	ctx, stop := context.WithDeadline(context.Background(), o.Until)
	defer stop()
	var wg sync.WaitGroup
	for _, k := range o.Kinds {
		attack(ctx, &wg, k, tg, res)
	}
	wg.Wait()
	return json.NewEncoder(os.Stdout).Encode(childReport{Answers: res.answers, Slowest: res.slowest, HugeOpened: res.hugeOpened.Load(),
		SlowOpened: res.slowOpened.Load(), IdleOpened: res.idleOpened.Load(), Refused503: res.refused503.Load()})
}
