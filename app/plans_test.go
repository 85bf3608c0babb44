package app

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/internal/schematest"
	"github.com/parleyhq/parley/webhooks/guard"
)

func postPlan(t *testing.T, srv *httptest.Server, token, query string, body []byte) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+PlansPath+query, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, []byte(b.String())
}

// POST /v1/plans judges a Terraform plan as the token's identity: the Kafka agent's plan for 24
// consumers is refused by the bound Terraform declares, 12 passes; the answer is the same document
// parley review --plan --json prints.
func TestPlansAPIJudgesAPlanAsTheTokensIdentity(t *testing.T) {
	_, h, _, token := proposalsSetup(t)
	srv := httptest.NewServer(&Plans{Proposals: h})
	defer srv.Close()
	read := func(name string) []byte {
		b, err := os.ReadFile("../reconcile/tfplan/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		plan, conclusion string
	}{{"kafka-scale-24.json", "failure"}, {"kafka-scale-12.json", "success"}} {
		code, body := postPlan(t, srv, token, "?module_dir=infra/kafka&intent=performance", read(c.plan))
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", c.plan, code, body)
		}
		schematest.Validate(t, "plan-review.schema.json", body)
		var doc struct {
			Conclusion string
			Author     struct{ Source, ID string }
		}
		if err := json.Unmarshal(body, &doc); err != nil || doc.Conclusion != c.conclusion || doc.Author.ID != agentARN {
			t.Fatalf("%s: %v %+v\n%s", c.plan, err, doc, body)
		}
	}
	for _, c := range []struct {
		name, token, query string
		body               []byte
		code               int
		want               string
	}{
		{"no token", "", "", read("kafka-scale-12.json"), 401, "Bearer"},
		{"malformed plan", token, "", read("malformed.json"), 422, "plan"},
		{"a state, not a plan", token, "", read("state.json"), 422, "plan"},
		{"unknown parameter", token, "?module=x", read("kafka-scale-12.json"), 400, "module"},
		{"escaping module dir", token, "?module_dir=../x", read("kafka-scale-12.json"), 400, "module_dir"},
		{"bad motivation", token, "?motivation=%20", read("kafka-scale-12.json"), 400, "motivation"},
		{"unknown repository", token, "?repository=acme/nowhere", read("kafka-scale-12.json"), 404, "acme/nowhere"},
	} {
		code, body := postPlan(t, srv, c.token, c.query, c.body)
		if code != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s, want %d containing %q", c.name, code, body, c.code, c.want)
		}
	}
}

// TestRefusedPlansSpendTheAddressBudget: a valid agent token sending plans Parley refuses (bigplan
// in bench/attack: 33 MB plans past 20,000 resources, back to back) had each one read and decoded
// as fast as it sent them. A refused plan now counts against its address's failure budget like a
// wrong token: past it the refusal is held before it is answered, with Retry-After, and the
// address's bodies are read paced; a plan Parley can judge from that address is still judged.
func TestRefusedPlansSpendTheAddressBudget(t *testing.T) {
	_, h, _, token := proposalsSetup(t)
	var holds int
	h.Failures = guard.NewFailures(guard.FailuresConfig{PerMinute: 1, Burst: 1, Sleep: func(context.Context, time.Duration) { holds++ }})
	plans := &Plans{Proposals: h}
	read := func(name string) []byte {
		b, err := os.ReadFile("../reconcile/tfplan/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	request := func(body []byte, query string) *http.Request {
		req := httptest.NewRequest(http.MethodPost, PlansPath+query, bytes.NewReader(body))
		req.RemoteAddr = "192.0.2.7:5000"
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		return req
	}
	post := func(body []byte, query string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		plans.ServeHTTP(rec, request(body, query))
		return rec
	}
	if rec := post(read("malformed.json"), ""); rec.Code != http.StatusUnprocessableEntity || rec.Header().Get("Retry-After") != "" || holds != 0 {
		t.Fatalf("the first refused plan: %d, Retry-After %q, %d holds; want 422 at once", rec.Code, rec.Header().Get("Retry-After"), holds)
	}
	if rec := post(read("malformed.json"), ""); rec.Code != http.StatusUnprocessableEntity || rec.Header().Get("Retry-After") == "" || holds != 1 {
		t.Fatalf("a refused plan past the budget: %d, Retry-After %q, %d holds; want 422 held once, with Retry-After", rec.Code, rec.Header().Get("Retry-After"), holds)
	}
	good := read("kafka-scale-12.json")
	pace := h.Failures.Pace(request(good, ""))
	if pace == nil {
		t.Fatal("the address over its budget has no pace")
	}
	// The body goes through the address's pace: with the pace shut (no burst) it cannot be read.
	pace.SetBurst(0)
	if rec := post(good, "?module_dir=infra/kafka&intent=performance"); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "read body") {
		t.Fatalf("with the address's pace shut: %d %s, want the body unread (400)", rec.Code, rec.Body)
	}
	pace.SetBurst(guard.PaceBurst)
	if rec := post(good, "?module_dir=infra/kafka&intent=performance"); rec.Code != http.StatusOK {
		t.Fatalf("a plan Parley judges, from the same address: %d %s", rec.Code, rec.Body)
	}
	if holds != 1 {
		t.Errorf("%d holds, want 1: a judged plan is never held", holds)
	}
}
