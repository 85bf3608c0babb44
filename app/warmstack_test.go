package app

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// onWorker reports whether the calling goroutine is a warm-stack worker.
func onWorker() bool {
	buf := make([]byte, 64<<10)
	return strings.Contains(string(buf[:runtime.Stack(buf, false)]), "(*warmStacks).work(")
}

// poolWorkers counts p's worker goroutines, and those of them idle (waiting for a job), from
// every goroutine's stack: a worker's frames name p as work's receiver.
func poolWorkers(p *warmStacks) (all, idle int) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	frame := fmt.Sprintf("(*warmStacks).work(%p", p)
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, frame) {
			continue
		}
		all++
		if strings.Contains(g, "[select") && !strings.Contains(g, "(*warmStacks).run(") {
			idle++
		}
	}
	return all, idle
}

// waitIdle waits until p has n workers, all idle.
func waitIdle(t *testing.T, p *warmStacks, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		all, idle := poolWorkers(p)
		if all == n && idle == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool has %d workers, %d idle; want %d idle", all, idle, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitGoroutines waits until the process has at most n goroutines: a worker that returned from
// its loop is still counted for a moment after Close's Wait saw its Done.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before the pool started: leaked\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWarmStacksRunsAJobOnAnIdleWorker(t *testing.T) {
	p := newWarmStacks(2)
	p.Start()
	defer p.Close()
	waitIdle(t, p, 2)
	for i := range 10 {
		ran := false
		p.Do(func() { ran = onWorker() })
		if !ran {
			t.Fatalf("job %d ran inline with an idle worker", i)
		}
		waitIdle(t, p, 2) // the worker is back in its loop once it has told Do
	}
}

func TestWarmStacksRunsInlineWhenEveryWorkerIsBusy(t *testing.T) {
	p := newWarmStacks(1)
	p.Start()
	defer p.Close()
	waitIdle(t, p, 1)
	hold, held := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() { // owned by this test: ends once hold is closed
		defer close(done)
		p.Do(func() { close(held); <-hold })
	}()
	<-held
	// The only worker is busy: this job does not wait for it, it runs here and now.
	inline := false
	p.Do(func() { inline = !onWorker() })
	if !inline {
		t.Fatal("with every worker busy the job did not run on the caller's goroutine")
	}
	close(hold)
	<-done
}

func TestWarmStacksJobsUseTheCallersState(t *testing.T) {
	// The job runs while Do's caller waits: it may write the caller's variables, and they read
	// them after Do without a lock (Do's return orders the job's writes before).
	p := newWarmStacks(0)
	p.Start()
	defer p.Close()
	waitIdle(t, p, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	sums := make([]int, 8)
	for i := range sums {
		wg.Add(1)
		go func() { // owned by this test: wg.Wait collects every one
			defer wg.Done()
			for j := range 100 {
				p.Do(func() { sums[i] += j })
			}
		}()
	}
	wg.Wait()
	for i, s := range sums {
		if s != 4950 {
			t.Errorf("caller %d: sum %d, want 4950", i, s)
		}
	}
}

func TestWarmStacksCloseStopsTheWorkersAndWaits(t *testing.T) {
	before := runtime.NumGoroutine()
	p := newWarmStacks(3)
	p.Start()
	p.Start() // once only: a second Start starts nothing more
	waitIdle(t, p, 3)
	hold, held := make(chan struct{}), make(chan struct{})
	jobDone := make(chan struct{})
	go func() { // owned by this test: ends once hold is closed
		defer close(jobDone)
		p.Do(func() { close(held); <-hold })
	}()
	<-held
	closed := make(chan struct{})
	go func() { // owned by this test: ends when Close returns
		defer close(closed)
		p.Close()
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while a worker was running a job")
	case <-time.After(50 * time.Millisecond):
	}
	close(hold)
	<-closed
	<-jobDone
	if all, _ := poolWorkers(p); all != 0 {
		t.Fatalf("%d workers still running after Close", all)
	}
	waitGoroutines(t, before)

	// After Close a job runs inline, and Start starts nothing again.
	inline := false
	p.Do(func() { inline = !onWorker() })
	if !inline {
		t.Fatal("a job handed over after Close did not run inline")
	}
	p.Start()
	p.Close()
	if all, _ := poolWorkers(p); all != 0 {
		t.Fatalf("Start after Close started %d workers", all)
	}
	waitGoroutines(t, before)
}

func TestWarmStacksNotStartedOrNilRunInline(t *testing.T) {
	before := runtime.NumGoroutine()
	for name, p := range map[string]*warmStacks{"nil": nil, "not started": newWarmStacks(2)} {
		inline := false
		p.Do(func() { inline = !onWorker() })
		if !inline {
			t.Errorf("%s: the job did not run inline", name)
		}
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("a pool that was not started runs %d goroutines", n-before)
	}
}

// panicOf runs p.Do(job) and returns what it panicked with, nil if it returned.
func panicOf(p *warmStacks, job func()) (v any) {
	defer func() { v = recover() }()
	p.Do(job)
	return nil
}

func TestWarmStacksPanicIsRaisedOnTheCaller(t *testing.T) {
	p := newWarmStacks(1)
	p.Start()
	defer p.Close()
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		value any
		check func(v any) bool
	}{
		{"a string", "kaboom", func(v any) bool {
			jp, ok := v.(*jobPanic)
			// The worker's stack travels with it: net/http's log line shows where it panicked.
			return ok && jp.value == "kaboom" && strings.Contains(jp.Error(), "kaboom") && strings.Contains(jp.Error(), "warmstack_test.go")
		}},
		{"an error", errBoom, func(v any) bool { err, ok := v.(error); return ok && errors.Is(err, errBoom) }},
		{"http.ErrAbortHandler, kept as it is", http.ErrAbortHandler, func(v any) bool { return v == http.ErrAbortHandler }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waitIdle(t, p, 1)
			onW := false
			v := panicOf(p, func() { onW = onWorker(); panic(tc.value) })
			if !onW {
				t.Fatal("the job did not run on the idle worker")
			}
			if !tc.check(v) {
				t.Fatalf("Do panicked with %#v", v)
			}
			// The worker survived its job's panic and takes the next job.
			waitIdle(t, p, 1)
			ran := false
			p.Do(func() { ran = onWorker() })
			if !ran {
				t.Fatal("after a job's panic the worker no longer takes jobs")
			}
		})
	}
}

func TestWarmStacksGoexitEndsTheCallerAndKeepsThePoolsSize(t *testing.T) {
	before := runtime.NumGoroutine()
	p := newWarmStacks(1)
	p.Start()
	waitIdle(t, p, 1)
	after := make(chan bool, 1)
	go func() { // owned by this test: ends by runtime.Goexit, through Do
		reached := false
		defer func() { after <- reached }()
		p.Do(runtime.Goexit)
		reached = true
	}()
	if <-after {
		t.Fatal("the code after a job that called runtime.Goexit ran, as it would not have inline")
	}
	waitIdle(t, p, 1) // a replacement took the worker's place
	ran := false
	p.Do(func() { ran = onWorker() })
	if !ran {
		t.Fatal("no worker took the job after one ended by runtime.Goexit")
	}
	p.Close()
	waitGoroutines(t, before)
}

// syncBuffer is a bytes.Buffer for a server's error log, written by its connections' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWarmStacksPanicIsContainedAsNetHTTPDoes serves a handler whose job panics over HTTP/2, as
// the API server calls the admission webhook, with and without workers: either way that request
// fails, net/http logs the panic, and the server (and the pool) go on answering.
func TestWarmStacksPanicIsContainedAsNetHTTPDoes(t *testing.T) {
	started := newWarmStacks(1)
	started.Start()
	defer started.Close()
	for name, p := range map[string]*warmStacks{"inline": nil, "on a worker": started} {
		t.Run(name, func(t *testing.T) {
			var errLog syncBuffer
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var answer string
				p.Do(func() {
					if r.URL.Path == "/panic" {
						panic("judging went wrong")
					}
					answer = fmt.Sprintf("worker=%v", onWorker())
				})
				io.WriteString(w, answer)
			}))
			srv.EnableHTTP2 = true
			srv.Config.ErrorLog = log.New(&errLog, "", 0)
			srv.StartTLS()
			defer srv.Close()
			client := srv.Client()
			get := func(path string) (string, error) {
				resp, err := client.Get(srv.URL + path)
				if err != nil {
					return "", err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err == nil && resp.ProtoMajor != 2 {
					t.Fatalf("answered over %s, not HTTP/2", resp.Proto)
				}
				return string(b), err
			}
			if p != nil {
				waitIdle(t, p, 1)
			}
			if b, err := get("/panic"); err == nil {
				t.Fatalf("a panicking handler answered %q", b)
			}
			// net/http resets the stream before it logs the panic: wait for the line.
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(errLog.String(), "judging went wrong"); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("net/http did not log the panic: %q", errLog.String())
				}
			}
			if p != nil {
				waitIdle(t, p, 1)
			}
			b, err := get("/ok")
			if want := fmt.Sprintf("worker=%v", p != nil); err != nil || b != want {
				t.Fatalf("after the panic: %q, %v; want %q", b, err, want)
			}
		})
	}
}
