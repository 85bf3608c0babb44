package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/parleyhq/parley/app/mcptools"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/agentstore"
	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/internal/schematest"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/tfplan"
)

const agentARN = "arn:aws:iam::123456789012:role/kafka-scaling-agent"

// proposalsSetup serves POST /v1/proposals over the demo repository (acme/infra) with one agent
// token for the Kafka scaling agent.
func proposalsSetup(t *testing.T) (*httptest.Server, *Proposals, *Drift, string) {
	t.Helper()
	srv, h, d, token, _ := proposalsSetupGH(t)
	return srv, h, d, token
}

// proposalsSetupGH is proposalsSetup with the fake GitHub the drift loop writes to.
func proposalsSetupGH(t *testing.T) (*httptest.Server, *Proposals, *Drift, string, *fakegithub.Server) {
	t.Helper()
	d, gh, _, clk := driftSetup(t, reconcile.ModeDirect)
	agents, err := agentstore.Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agents.Close() })
	// acme/nowhere too, so that the tests can ask for a repository the App is not installed on.
	secret, _, err := agents.Create(context.Background(), "kafka-agent", core.Identity{Source: core.SourceAWSPrincipal, ID: agentARN}, []string{"acme/infra", "acme/nowhere"}, clk.now())
	if err != nil {
		t.Fatal(err)
	}
	h := &Proposals{Drift: d, Agents: agents, MaxAge: time.Minute, Now: clk.now}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, h, d, secret, gh
}

func propose(t *testing.T, srv *httptest.Server, token, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+ProposalsPath, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, resp.Header, b.Bytes()
}

const capacityField = "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity"

func TestProposalsAPIJudgesBeforeTheChange(t *testing.T) {
	srv, _, d, token := proposalsSetup(t)
	ctx := context.Background()

	// 24 is beyond max_size 16: refused, saying who holds the field.
	code, _, body := propose(t, srv, token, `{"claims":[{"field":"`+capacityField+`","value":24,"intent":"performance"}]}`)
	if code != http.StatusOK {
		t.Fatalf("24: %d %s", code, body)
	}
	schematest.Validate(t, "proposal-response.schema.json", body)
	var resp ProposalResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Refused != 1 || resp.Accepted != 0 || resp.Repository != "acme/infra" || resp.Verdicts[0].Decision != "veto" ||
		resp.Verdicts[0].Holder == nil || !strings.Contains(resp.Verdicts[0].Explanation, "max") {
		t.Fatalf("24: %s", body)
	}
	// 12 for an incident, for 4 hours: accepted, and the claim stands before the answer.
	req12 := `{"idempotency_key":"scale-12","claims":[{"field":"` + capacityField + `","value":12,"intent":"performance","motivation":{"kind":"incident","ref":"INC-7"},"expires":"4h"}]}`
	schematest.Validate(t, "proposal-request.schema.json", []byte(req12))
	code, _, body = propose(t, srv, token, req12)
	if code != http.StatusOK {
		t.Fatalf("12: %d %s", code, body)
	}
	schematest.Validate(t, "proposal-response.schema.json", body)
	json.Unmarshal(body, &resp)
	if resp.Accepted != 1 || !resp.Verdicts[0].Accepted || resp.Verdicts[0].Until == "" || resp.Actor.PolicyActor != "kafka-agent" {
		t.Fatalf("12: %s", body)
	}
	rd, err := d.repo(ctx, "acme/infra", "")
	if err != nil {
		t.Fatal(err)
	}
	f, _ := core.ParseField(capacityField)
	if st, _ := rd.state.Standing(ctx, f); len(st) != 1 || st[0].Evidence.Source != reconcile.EvidenceProposal || st[0].Evidence.EventIDs[0] != resp.Proposal {
		t.Fatalf("standing after the accepted proposal: %+v", st)
	}
	// A retry gets the first answer; the same key for another proposal is refused.
	code, hdr, again := propose(t, srv, token, req12)
	if code != http.StatusOK || !bytes.Equal(again, body) || hdr.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %s", code, again)
	}
	if code, _, b := propose(t, srv, token, strings.Replace(req12, `"value":12`, `"value":13`, 1)); code != http.StatusUnprocessableEntity || !strings.Contains(string(b), "scale-12") {
		t.Fatalf("key reused: %d %s", code, b)
	}
	if st, _ := rd.state.Standing(ctx, f); len(st) != 1 {
		t.Fatalf("a retry recorded the claim again: %+v", st)
	}
}

func TestProposalsAPIRefusesBadRequests(t *testing.T) {
	srv, h, _, token := proposalsSetup(t)
	good := `{"claims":[{"field":"` + capacityField + `","value":10}]}`
	for _, c := range []struct {
		name, token, body string
		header            []string
		code              int
		want              string
	}{
		{"no credentials", "", good, nil, 401, "Authorization: Bearer"},
		{"unknown token", "parley_0011223344556677_nope", good, nil, 401, "not valid"},
		{"wrong content type", token, good, []string{"Content-Type", "text/plain"}, 415, "application/json"},
		{"not JSON", token, `{"claims":`, nil, 400, "body"},
		{"unknown key", token, `{"claims":[],"sudo":true}`, nil, 400, "sudo"},
		{"duplicate key", token, `{"claims":[{"field":"` + capacityField + `","value":1,"value":10}]}`, nil, 400, `duplicate key \"value\" in the object at $.claims[0]`},
		{"no claims", token, `{"claims":[]}`, nil, 422, "at least one claim"},
		{"bad field", token, `{"claims":[{"field":"tf:nowhere","value":1}]}`, nil, 422, "claims[0]"},
		{"actor sent", token, `{"claims":[{"field":"` + capacityField + `","value":1,"actor":{"source":"git-author","id":"boss"}}]}`, nil, 422, "actor"},
		{"past expiry", token, `{"claims":[{"field":"` + capacityField + `","value":1,"expires":"2020-01-01T00:00:00Z"}]}`, nil, 422, "not in the future"},
		{"twice one field", token, `{"claims":[{"field":"` + capacityField + `","value":1},{"field":"` + capacityField + `","value":2}]}`, nil, 422, "one claim per field"},
		{"unknown repository", token, `{"repository":"acme/nowhere","claims":[{"field":"` + capacityField + `","value":1}]}`, nil, 404, "acme/nowhere"},
		{"too large", token, `{"claims":[{"field":"` + capacityField + `","value":"` + strings.Repeat("x", maxProposalBytes) + `"}]}`, nil, 413, "limit"},
		{"key header and body differ", token, `{"idempotency_key":"a","claims":[]}`, []string{"Idempotency-Key", "b"}, 400, "differ"},
	} {
		code, _, body := propose(t, srv, c.token, c.body, c.header...)
		if code != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s, want %d containing %q", c.name, code, body, c.code, c.want)
		}
	}
	// GET is not a proposal.
	resp, err := http.Get(srv.URL + ProposalsPath)
	if err != nil || resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("GET: %v %v", resp, err)
	}
	resp.Body.Close()
	// A token over its rate is told to slow down.
	h.Rate, h.Burst = rate.Limit(0.001), 1
	if code, _, _ := propose(t, srv, token, good); code != http.StatusOK {
		t.Fatalf("within the burst: %d", code)
	}
	if code, hdr, body := propose(t, srv, token, good); code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" || !strings.Contains(string(body), "kafka-agent") {
		t.Fatalf("over the rate: %d %s", code, body)
	}
}

// TestAgentTokensActOnlyOnTheirRepositories: a token names the repositories it may act on; on any
// other - the default one included - /v1/proposals and /v1/plans answer 403 saying which it may
// act on, and /mcp's tools refuse, before anything is judged.
func TestAgentTokensActOnlyOnTheirRepositories(t *testing.T) {
	srv, h, _, _ := proposalsSetup(t)
	other, _, err := h.Agents.Create(context.Background(), "eu-agent", core.Identity{Source: core.SourceAWSPrincipal, ID: agentARN}, []string{"acme/prod-eu"}, h.now())
	if err != nil {
		t.Fatal(err)
	}
	claim := `"claims":[{"field":"` + capacityField + `","value":10}]`
	for _, body := range []string{`{` + claim + `}`, `{"repository":"acme/infra",` + claim + `}`} {
		code, _, out := propose(t, srv, other, body)
		if code != http.StatusForbidden || !strings.Contains(string(out), "token eu-agent may act on acme/prod-eu, not acme/infra") {
			t.Errorf("proposal %s: %d %s, want 403", body, code, out)
		}
	}
	plans := httptest.NewServer(&Plans{Proposals: h})
	defer plans.Close()
	plan, err := os.ReadFile("../reconcile/tfplan/testdata/kafka-scale-12.json")
	if err != nil {
		t.Fatal(err)
	}
	if code, out := postPlan(t, plans, other, "?module_dir=infra/kafka", plan); code != http.StatusForbidden || !strings.Contains(string(out), "may act on acme/prod-eu") {
		t.Errorf("plan: %d %s, want 403", code, out)
	}
	mcpSrv := httptest.NewServer(&MCP{Proposals: h, Version: "test"})
	defer mcpSrv.Close()
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpSrv.URL,
		HTTPClient: &http.Client{Transport: bearer{token: other, base: http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for tool, args := range map[string]map[string]any{
		mcptools.ToolPropose: {"field": capacityField, "value": 10},
		mcptools.ToolExplain: {"field": capacityField},
		mcptools.ToolClaims:  {"pattern": "tf:**//aws_autoscaling_group.*#/*"},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || !res.IsError || !strings.Contains(fmt.Sprint(res.Content[0]), "may act on acme/prod-eu") {
			t.Errorf("%s: %v %+v, want the tool to refuse", tool, err, res)
		}
	}
}

// proposals_max_age = 0 fetches for every proposal: the view the proposal refreshed is the one it
// is judged against, however old it is by the time it is read (it looped, refreshing, forever).
func TestProposalWithMaxAgeZeroIsAnswered(t *testing.T) {
	srv, h, _, token := proposalsSetup(t)
	h.MaxAge = 0
	req, _ := http.NewRequest(http.MethodPost, srv.URL+ProposalsPath,
		strings.NewReader(`{"claims":[{"field":"`+capacityField+`","value":12,"intent":"performance"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// countingBody is a request body that counts what is read of it.
type countingBody struct {
	r    io.Reader
	read int
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}
func (c *countingBody) Close() error { return nil }

// TestAgentBodyOverItsLimitIsRefusedUnread: a holder of a valid agent token who declares a plan
// past the limit is answered 413 before a byte is read, and a body within it is held once, not
// in a buffer grown by doubling (issue 34: one connection sending 75 MB plans held 475 MiB).
func TestAgentBodyOverItsLimitIsRefusedUnread(t *testing.T) {
	_, h, _, token := proposalsSetup(t)
	plans := &Plans{Proposals: h}
	post := func(body io.ReadCloser, length int64) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, PlansPath, body)
		req.ContentLength = length
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		plans.ServeHTTP(rec, req)
		return rec
	}
	big := &countingBody{r: io.LimitReader(zeros{}, tfplan.MaxPlanSize+1)}
	if rec := post(big, tfplan.MaxPlanSize+1); rec.Code != http.StatusRequestEntityTooLarge || big.read != 0 {
		t.Fatalf("declared past the limit: %d after reading %d bytes, want 413 before any: %s", rec.Code, big.read, rec.Body)
	}
	chunked := &countingBody{r: io.LimitReader(zeros{}, tfplan.MaxPlanSize+1)}
	if rec := post(chunked, -1); rec.Code != http.StatusRequestEntityTooLarge || chunked.read > tfplan.MaxPlanSize+1 {
		t.Fatalf("chunked past the limit: %d after reading %d bytes, want 413 at the limit", rec.Code, chunked.read)
	}
	// 4 MiB declared and sent (not a plan: the answer comes as soon as it is read): what
	// answering allocates is about the body, not a buffer grown by doubling.
	const size = 4 << 20
	doc := "x" + strings.Repeat(" ", size-1)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rec := post(io.NopCloser(strings.NewReader(doc)), size)
	runtime.ReadMemStats(&after)
	if rec.Code != http.StatusUnprocessableEntity {
		t.Fatalf("not a plan: %d %s", rec.Code, rec.Body)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > size*3/2 {
		t.Errorf("answering a %d-byte body allocated %d bytes, want under 1.5 times the body", size, got)
	}
}

// zeros reads as endless spaces (valid JSON whitespace).
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}
