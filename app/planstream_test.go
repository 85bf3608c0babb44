package app

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/agentstore"
	"github.com/parleyhq/parley/reconcile/tfplan"
)

// attackPlan is bench/attack's bigplan body (bench/attack/admission.go): resources updates and
// nothing else; 300,000 of them are about 37 MB, under the 64 MiB a plan may be. action "no-op"
// makes a plan Parley judges without a change.
func attackPlan(resources int, action string) []byte {
	var b strings.Builder
	b.WriteString(`{"format_version":"1.2","resource_changes":[`)
	for i := range resources {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"address":"a.b%d","mode":"managed","type":"a","name":"b%d","change":{"actions":[%q],"before":{"x":1},"after":{"x":2}}}`, i, i, action)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// countingReader reads r and counts what was read.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// planRequest is a POST of body to /v1/plans with token, its length declared (or not, if chunked).
func planRequest(token string, body io.Reader, declared int64) *http.Request {
	req := httptest.NewRequest(http.MethodPost, PlansPath, body)
	req.ContentLength = declared
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	return req
}

// TestPlansPastTheBudgetAreRefusedAsTheyArrive: a plan past the resource budget is refused as soon
// as the bytes read prove it, not once it is read whole. bench/attack's bigplan (300,000
// resources, 37 MB, with a valid agent token) had a buffer of its declared length zeroed (0.40 s of
// serve's CPU in 15 s of the attack), read from the socket and, for an address over its failure
// budget, paced before ParsePlan refused it; its first 2.6 MB decide. Now the handler reads at most
// twice what proves it and allocates about a quarter of the body, answers ParsePlan's own
// refusal, and closes the connection so the rest is not read after it either; a body of no
// declared length too. A plan at the budget, as large, is read whole and judged.
func TestPlansPastTheBudgetAreRefusedAsTheyArrive(t *testing.T) {
	_, h, _, token := proposalsSetup(t)
	plans := &Plans{Proposals: h}
	doc := attackPlan(300_000, "update")
	proof := bytes.Index(doc, []byte(`{"address":"a.b20000"`)) + 1
	for _, declared := range []int64{int64(len(doc)), -1} {
		src := &countingReader{r: bytes.NewReader(doc)}
		req := planRequest(token, src, declared)
		rec := httptest.NewRecorder()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		plans.ServeHTTP(rec, req)
		runtime.ReadMemStats(&after)
		if want := "plan: " + tfplan.ErrTooManyResources.Error(); rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), want) {
			t.Fatalf("declared %d: %d %s, want 422 %q", declared, rec.Code, rec.Body, want)
		}
		if rec.Header().Get("Connection") != "close" {
			t.Errorf("declared %d: Connection %q, want close: the rest is left unread", declared, rec.Header().Get("Connection"))
		}
		if src.n < proof || src.n > 2*proof {
			t.Errorf("declared %d: read %d bytes of %d; the first %d prove it past the budget", declared, src.n, len(doc), proof)
		}
		// Allocated in all, garbage included: a bound on the peak. Reading the body whole
		// allocated its declared length (37 MB), or about twice it without one.
		t.Logf("declared %d: refused having read %d of %d bytes, %d allocated", declared, src.n, len(doc), after.TotalAlloc-before.TotalAlloc)
		if got := after.TotalAlloc - before.TotalAlloc; got > uint64(len(doc)/3) {
			t.Errorf("declared %d: refusing a %d-byte plan allocated %d bytes", declared, len(doc), got)
		}
	}
	at := attackPlan(tfplan.MaxPlanResources, "no-op")
	src := &countingReader{r: bytes.NewReader(at)}
	rec := httptest.NewRecorder()
	plans.ServeHTTP(rec, planRequest(token, src, int64(len(at))))
	if rec.Code != http.StatusOK || src.n != len(at) {
		t.Fatalf("a plan at the budget: %d, %d of %d bytes read: %s", rec.Code, src.n, len(at), rec.Body)
	}
}

// TestPlansPastTheBudgetAreAnsweredBeforeTheirRestArrives: through a server, a plan past the
// budget whose sender stops after its first 6 MiB, still declaring 37 MB, is answered 422 and
// its connection closed; before, the server waited for the rest (the body's deadline, minutes).
func TestPlansPastTheBudgetAreAnsweredBeforeTheirRestArrives(t *testing.T) {
	_, h, _, token := proposalsSetup(t)
	srv := httptest.NewServer(&Plans{Proposals: h})
	defer srv.Close()
	doc := attackPlan(300_000, "update")
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() {
		// What the server does not read stays unsent: the write's error is the test's end.
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: parley\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", PlansPath, token, len(doc))
		conn.Write(doc[:6<<20])
	}()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer before the rest of the plan: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), tfplan.ErrTooManyResources.Error()) || !resp.Close {
		t.Fatalf("%d (close %v) %s, want 422, the budget named, the connection closed", resp.StatusCode, resp.Close, body)
	}
}

// TestReadPlanReadsWhatItIsGiven: a plan within the budget is read whole, to a buffer of its
// declared length exactly (what it is judged from holds nothing more), or as much as it is
// without one; a body shorter than declared is io.ErrUnexpectedEOF; one of no declared length
// past the limit is the limit's error. Never over, over is asked of each prefix as it grows, at
// most twice per doubling.
func TestReadPlanReadsWhatItIsGiven(t *testing.T) {
	doc := attackPlan(5_000, "update")
	for _, declared := range []int64{int64(len(doc)), -1} {
		asked := 0
		got, over, err := readPlan(bytes.NewReader(doc), declared, int64(len(doc)), func(prefix []byte) (bool, error) {
			if !bytes.Equal(prefix, doc[:len(prefix)]) {
				t.Fatalf("asked of %d bytes that are not the body's first", len(prefix))
			}
			asked++
			return false, nil
		})
		if err != nil || over || !bytes.Equal(got, doc) {
			t.Fatalf("declared %d: %d bytes, over %v, %v", declared, len(got), over, err)
		}
		if declared >= 0 && cap(got) != len(doc) {
			t.Errorf("a %d-byte body in a buffer of %d", len(doc), cap(got))
		}
		if asked == 0 || asked > 2*bitsLen(len(doc)) {
			t.Errorf("declared %d: over asked %d times for %d bytes", declared, asked, len(doc))
		}
	}
	never := func([]byte) (bool, error) { return false, nil }
	if _, _, err := readPlan(bytes.NewReader(doc[:100]), int64(len(doc)), int64(len(doc)), never); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a short body: %v", err)
	}
	rec := httptest.NewRecorder()
	limited := http.MaxBytesReader(rec, io.NopCloser(bytes.NewReader(doc)), 1000)
	if _, _, err := readPlan(limited, -1, 1000, never); !errors.As(err, new(*http.MaxBytesError)) {
		t.Errorf("past the limit: %v", err)
	}
	// The buffer's last growth is from a quarter of the declared length: the copy holds a
	// quarter more than the body, not twice it.
	for _, size := range []int64{1, 64 << 10, 300 << 10, 37_000_001, 64 << 20} {
		have, prev := 0, 0
		for have < int(size) {
			prev, have = have, growTo(have, size, true, 64<<10)
		}
		if have != int(size) || (size >= 4*(64<<10) && prev != int((size+3)/4)) {
			t.Errorf("size %d: grew to %d from %d", size, have, prev)
		}
	}
}

// bitsLen is how many doublings from 1 reach n.
func bitsLen(n int) int {
	b := 0
	for ; n > 0; n >>= 1 {
		b++
	}
	return b
}

// BenchmarkPlanRefusal: what refusing bench/attack's bigplan body (300,000 resources, ~37 MB,
// with a valid agent token) costs the handler. read-whole is how it was refused before: the body
// read into a buffer of its declared length (admit), then ParsePlan; as-it-arrives is Plans
// now. Run: go test ./app -run '^$' -bench BenchmarkPlanRefusal -benchtime 20x
func BenchmarkPlanRefusal(b *testing.B) {
	agents, err := agentstore.Open(context.Background(), ":memory:")
	if err != nil {
		b.Fatal(err)
	}
	defer agents.Close()
	token, _, err := agents.Create(context.Background(), "kafka-agent", core.Identity{Source: core.SourceAWSPrincipal, ID: agentARN}, []string{"acme/infra"}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	h := &Proposals{Agents: agents}
	doc := attackPlan(300_000, "update")
	for _, bc := range []struct {
		name  string
		serve func(w http.ResponseWriter, r *http.Request) int
	}{
		{"read-whole", func(w http.ResponseWriter, r *http.Request) int {
			_, body, code := h.admit(w, r, tfplan.MaxPlanSize)
			if code != 0 {
				return code
			}
			if _, err := tfplan.ParsePlan(body); errors.Is(err, tfplan.ErrTooManyResources) {
				return http.StatusUnprocessableEntity
			}
			return http.StatusOK
		}},
		{"as-it-arrives", func(w http.ResponseWriter, r *http.Request) int {
			(&Plans{Proposals: h}).ServeHTTP(w, r)
			return w.(*httptest.ResponseRecorder).Code
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				if code := bc.serve(rec, planRequest(token, bytes.NewReader(doc), int64(len(doc)))); code != http.StatusUnprocessableEntity {
					b.Fatalf("%d %s", code, rec.Body)
				}
			}
		})
	}
}
