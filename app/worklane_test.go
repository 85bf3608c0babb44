package app

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The lane lends all processors but one, and never more sections than its size run at once.
func TestWorkLaneLendsAllProcessorsButOne(t *testing.T) {
	if got, want := NewWorkLane(0).Size(), max(1, runtime.GOMAXPROCS(0)-1); got != want {
		t.Errorf("NewWorkLane(0).Size() = %d, want %d (GOMAXPROCS %d)", got, want, runtime.GOMAXPROCS(0))
	}
	l := NewWorkLane(2)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for range 6 {
		wg.Go(func() {
			if err := l.Do(context.Background(), func() { <-gate }); err != nil {
				t.Error(err)
			}
		})
	}
	time.Sleep(50 * time.Millisecond) // every goroutine is in the lane or waiting for it
	close(gate)
	wg.Wait()
	if l.Peak() != 2 {
		t.Errorf("peak %d sections at once in a lane of 2", l.Peak())
	}
}

// A section waiting for a full lane gives up when its context ends, and runs nothing; a release
// called twice frees one slot, not two; a nil lane runs at once.
func TestWorkLaneWaitEndsWithTheContext(t *testing.T) {
	l := NewWorkLane(1)
	release, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	ran := false
	if err := l.Do(ctx, func() { ran = true }); !errors.Is(err, context.DeadlineExceeded) || ran {
		t.Fatalf("Do on a full lane: %v, ran %v; want the deadline and nothing run", err, ran)
	}
	release()
	release()
	second, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if _, err := l.Acquire(short); err == nil {
		t.Fatal("a release called twice freed two slots of a lane of one")
	}
	second()
	var none *WorkLane
	if err := none.Do(context.Background(), func() { ran = true }); err != nil || !ran {
		t.Fatalf("nil lane: %v, ran %v", err, ran)
	}
}

// A plan is decoded and judged in the lane: with the lane's one slot taken, a plan waits, and its
// request ends unjudged when the client goes away; once the lane has room it is judged.
func TestPlansAreJudgedInTheWorkLane(t *testing.T) {
	_, h, _, token := proposalsSetup(t)
	lane := NewWorkLane(1)
	plans := &Plans{Proposals: h, Lane: lane}
	body, err := os.ReadFile("../reconcile/tfplan/testdata/kafka-scale-12.json")
	if err != nil {
		t.Fatal(err)
	}
	post := func(ctx context.Context) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, PlansPath+"?module_dir=infra/kafka&intent=performance", bytes.NewReader(body)).WithContext(ctx)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		plans.ServeHTTP(rec, req)
		return rec
	}
	release, err := lane.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if rec := post(ctx); rec.Body.Len() != 0 {
		t.Fatalf("a plan judged while the lane was full: %d %s", rec.Code, rec.Body)
	}
	release()
	if rec := post(context.Background()); rec.Code != http.StatusOK {
		t.Fatalf("with room in the lane: %d %s", rec.Code, rec.Body)
	}
	if lane.Peak() != 1 {
		t.Fatalf("lane peak %d, want the plan's sections inside it", lane.Peak())
	}
}

// A large admission review is read and judged in the work lane too, so that large reviews and
// plans together never hold every processor: with the lane's one slot taken (by a plan, say) a
// large review waits within its budget and is answered 503, while an ordinary review is judged at
// once; with room it is judged.
func TestLargeAdmissionReviewsTakeTheWorkLane(t *testing.T) {
	srv, h, _ := admissionSetup(t, "deny")
	h.Lane = NewWorkLane(1)
	var sel bytes.Buffer
	for i := 0; sel.Len() < largeReview; i++ {
		sel.WriteString(`"node.example.com/k` + time.Duration(i).String() + `":"v",`)
	}
	dep := `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"prod","resourceVersion":"41"},` +
		`"spec":{"template":{"spec":{"nodeSelector":{%s"zone":"a"}}}}}`
	big := reviewOf("large", costSA, "", fmtOne(dep, sel.String()), fmtOne(dep, ""), false)
	if _, _, raw := admit(t, srv, admissionToken, scaleReview("warm", hpaSA, 3, 4, false)); !bytes.Contains([]byte(raw), []byte("uid-warm")) {
		t.Fatalf("warm-up: %s", raw)
	}
	h.Budget = 300 * time.Millisecond
	release, err := h.Lane.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if code, _, raw := admit(t, srv, admissionToken, big); code != http.StatusServiceUnavailable || !bytes.Contains([]byte(raw), []byte("lent to large work")) {
		t.Fatalf("a large review while the work lane is full: %d %.300s, want 503", code, raw)
	}
	if code, resp, raw := admit(t, srv, admissionToken, scaleReview("small", hpaSA, 4, 5, false)); code != http.StatusOK || !resp.Allowed {
		t.Fatalf("an ordinary review while the work lane is full: %d %.300s", code, raw)
	}
	release()
	h.Budget = time.Minute
	if code, resp, raw := admit(t, srv, admissionToken, big); code != http.StatusOK || string(resp.UID) != "uid-large" {
		t.Fatalf("a large review with room in the work lane: %d %.300s", code, raw)
	}
	if h.Lane.Peak() != 1 {
		t.Fatalf("work lane peak %d, want the large review inside it", h.Lane.Peak())
	}
}

func fmtOne(format, arg string) string { return strings.Replace(format, "%s", arg, 1) }
