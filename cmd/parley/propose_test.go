package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/parleyhq/parley/app"
	"github.com/parleyhq/parley/internal/schematest"
)

const (
	capacityField = "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity"
	// proposeAt is before the demo policy's peak-sales freeze, so the verdicts do not move with the
	// clock.
	proposeAt = "2026-11-20T10:06:00Z"
)

func proposeLocal(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	return runCLI(t, append([]string{"propose", "--repo", dir, "--as", agentIdentity, "--at", proposeAt}, args...)...)
}

func TestProposeOfflineRefusesBeyondTheBoundAndAcceptsWithin(t *testing.T) {
	dir, _ := demoRepo(t)

	code, out, errOut := proposeLocal(t, dir, "--field", capacityField, "--value", "24", "--intent", "performance")
	if code != exitFindings {
		t.Fatalf("24: exit %d, want 1: %s%s", code, out, errOut)
	}
	for _, want := range []string{"0 accepted, 1 refused", "REFUSED  " + capacityField, "decision: veto", "rule:     bounds",
		"holder:   git <git-author:", "wants 5", "above the maximum 16", "why:"} {
		if !strings.Contains(out, want) {
			t.Errorf("24 lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "1 of 1 proposed claim(s) refused") {
		t.Errorf("stderr: %s", errOut)
	}

	code, out, errOut = proposeLocal(t, dir, "--field", capacityField, "--value", "12", "--intent", "performance",
		"--motivation", "incident:INC-7", "--expires", "4h")
	if code != 0 {
		t.Fatalf("12 for 4h: exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{"1 accepted, 0 refused", "by kafka-agent <" + agentIdentity + ">", "ACCEPTED  " + capacityField,
		"decision: yield", "until:    2026-11-20T14:06:00Z"} {
		if !strings.Contains(out, want) {
			t.Errorf("12 lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "holder:") || strings.Contains(out, "why:") {
		t.Errorf("an accepted claim is explained like a refusal:\n%s", out)
	}
}

func TestProposeOfflineJSON(t *testing.T) {
	dir, _ := demoRepo(t)
	code, out, errOut := proposeLocal(t, dir, "--json", "--repository", "acme/infra",
		"--field", capacityField, "--value", "24",
		"--field", "tf:infra/kafka//aws_autoscaling_group.consumer#/min_size", "--yield")
	if code != exitFindings {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	schematest.Validate(t, "proposal-response.schema.json", []byte(out))
	var resp app.ProposalResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Repository != "acme/infra" || len(resp.Verdicts) != 2 || resp.Verdicts[0].Field != capacityField || resp.Verdicts[0].Accepted ||
		resp.Verdicts[0].Holder == nil || resp.Accepted+resp.Refused != 2 || !strings.HasPrefix(resp.Proposal, "prop-") {
		t.Fatalf("answer:\n%s", out)
	}

	code, out, errOut = proposeLocal(t, dir, "--json", "--field", capacityField, "--expr", "var.capacity", "--expires", "2026-11-20T16:00:00Z")
	if code != 0 && code != exitFindings {
		t.Fatalf("expr: exit %d: %s", code, errOut)
	}
	schematest.Validate(t, "proposal-response.schema.json", []byte(out))
	if err := json.Unmarshal([]byte(out), &resp); err != nil || resp.Repository != "local/infra" {
		t.Fatalf("a repository without origin is named local/<directory>: %v\n%s", err, out)
	}
}

// With --state, accepted claims are recorded as the server records them, once per idempotency key.
func TestProposeOfflineRecordsAcceptedClaimsInTheState(t *testing.T) {
	dir, _ := demoRepo(t)
	state := filepath.Join(t.TempDir(), "drift.db")
	var ids []string
	for range 2 {
		code, out, errOut := proposeLocal(t, dir, "--state", state, "--idempotency-key", "scale-12", "--json",
			"--field", capacityField, "--value", "12", "--expires", "4h")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var resp app.ProposalResponse
		if err := json.Unmarshal([]byte(out), &resp); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.Proposal)
	}
	if ids[0] != ids[1] {
		t.Errorf("the same idempotency key gave proposals %v", ids)
	}
	code, out, errOut := runCLI(t, "verdicts", "--state", state)
	if code != 0 || strings.Count(out, capacityField) != 1 || !strings.Contains(out, "proposed and accepted") || !strings.Contains(out, "proposal/"+ids[0]) {
		t.Errorf("verdicts in the state: exit %d\n%s%s", code, out, errOut)
	}
}

func TestProposeBadInput(t *testing.T) {
	dir, _ := demoRepo(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--field", capacityField, "--value", "{bad"}, `invalid argument "{bad" for "--value"`},
		{[]string{"--field", capacityField, "--value", "m5.large"}, `a string needs JSON quotes: --value '"m5.large"'`},
		{[]string{"--value", "12"}, "--value must follow the --field"},
		{[]string{"--field", capacityField}, "has no --value, --expr, --yield or --remove"},
		{[]string{"--field", capacityField, "--value", "12", "--yield"}, "already has --value"},
		{[]string{"--field", capacityField, "--value", "12", "--field", capacityField, "--value", "13"}, "given twice"},
		{[]string{"--field", "not-a-field", "--value", "12"}, `for "--field"`},
		{[]string{"--field", capacityField, "--value", "12", "--expires", "soon"}, "--expires"},
		{[]string{"--field", capacityField, "--value", "12", "--expires", "2026-11-20T09:00:00Z"}, "not in the future"},
		{[]string{"--field", capacityField, "--value", "12", "--motivation", "incident:INC-7 severity=dire"}, "--motivation"},
		{[]string{"--field", capacityField, "--value", "12", "--repository", "acme"}, "want owner/name"},
		{[]string{"--field", capacityField, "--value", "12", "--token-file", "t"}, "--token-file goes with --server"},
		{nil, "nothing proposed"},
	} {
		code, out, errOut := proposeLocal(t, dir, tt.args...)
		if code != exitUsage || !strings.Contains(errOut, tt.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.args, code, out, errOut, tt.want)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"propose", "--field", capacityField, "--value", "12"}, "give --server URL"},
		{[]string{"propose", "--repo", dir, "--field", capacityField, "--value", "12"}, "--as SOURCE:ID is required"},
		{[]string{"propose", "--repo", dir, "--as", "aws:x", "--field", capacityField, "--value", "12"}, `unknown source "aws"`},
		{[]string{"propose", "--repo", dir, "--server", "http://localhost", "--field", capacityField, "--value", "12"}, "not both"},
		{[]string{"propose", "--repo", t.TempDir(), "--as", agentIdentity, "--field", capacityField, "--value", "12"}, "not a git repository"},
	} {
		code, _, errOut := runCLI(t, tt.args...)
		if code != exitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
	// The token is never a flag: a command line is visible to every user of the machine.
	if newProposeCmd().Flags().Lookup("token") != nil {
		t.Error("propose has a --token flag")
	}
}

// proposalsServer stands in for parley serve's POST /v1/proposals (app.Proposals needs a GitHub
// App installation to reach its repository): it checks the bearer token, records the body the CLI
// sent, and answers with canned bodies: a refusal for a value of 24, else an acceptance.
type proposalsServer struct {
	*httptest.Server
	token             string
	refused, accepted []byte

	mu       sync.Mutex
	requests []*http.Request
	bodies   [][]byte
}

func newProposalsServer(t *testing.T, refused, accepted []byte) *proposalsServer {
	s := &proposalsServer{token: "parley_0123456789abcdef_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA", refused: refused, accepted: accepted}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.requests, s.bodies = append(s.requests, r), append(s.bodies, body)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path != app.ProposalsPath || r.Method != http.MethodPost:
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":"not found"}`+"\n")
		case r.Header.Get("Authorization") == "Bearer unavailable":
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":"the token store is unavailable; send the proposal again later"}`+"\n")
		case r.Header.Get("Authorization") != "Bearer "+s.token:
			w.Header().Set("WWW-Authenticate", `Bearer realm="parley", error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"the token is not valid (unknown or revoked)"}`+"\n")
		case strings.Contains(string(body), `"value":24`):
			w.Write(s.refused)
		default:
			w.Write(s.accepted)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *proposalsServer) last(t *testing.T) (*http.Request, []byte) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		t.Fatal("no request reached the server")
	}
	return s.requests[len(s.requests)-1], s.bodies[len(s.bodies)-1]
}

func (s *proposalsServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// compact is a JSON document as the server writes it: compact, with a newline.
func compact(t *testing.T, doc string) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return append(b, '\n')
}

func TestProposeOnline(t *testing.T) {
	// The canned answers are real ones, judged offline against the demo repository.
	dir, _ := demoRepo(t)
	_, refused, _ := proposeLocal(t, dir, "--json", "--repository", "acme/infra", "--field", capacityField, "--value", "24")
	_, accepted, _ := proposeLocal(t, dir, "--json", "--repository", "acme/infra", "--field", capacityField, "--value", "12", "--expires", "4h")
	srv := newProposalsServer(t, compact(t, refused), compact(t, accepted))
	t.Setenv("PARLEY_TOKEN", srv.token)

	code, out, errOut := runCLI(t, "propose", "--server", srv.URL+"/", "--repository", "acme/infra", "--idempotency-key", "scale-24",
		"--field", capacityField, "--value", "24", "--intent", "Performance", "--motivation", "incident:INC-7", "--expires", "4h")
	if code != exitFindings || !strings.Contains(out, "REFUSED  "+capacityField) || !strings.Contains(out, "above the maximum 16") {
		t.Fatalf("24: exit %d\n%s%s", code, out, errOut)
	}
	r, body := srv.last(t)
	if r.URL.Path != "/v1/proposals" || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Authorization") != "Bearer "+srv.token {
		t.Errorf("request: %s %s %v", r.Method, r.URL, r.Header)
	}
	schematest.Validate(t, "proposal-request.schema.json", body)
	if want := `{"repository":"acme/infra","idempotency_key":"scale-24","claims":[{"field":"` + capacityField +
		`","value":24,"intent":"performance","motivation":{"kind":"incident","ref":"INC-7"},"expires":"4h"}]}`; string(body) != want {
		t.Errorf("request body:\n%s\nwant\n%s", body, want)
	}

	// --json prints the server's body exactly; the token may come from a file.
	tokenFile := writeFile(t, filepath.Join(t.TempDir(), "token"), srv.token+"\n")
	t.Setenv("PARLEY_TOKEN", "")
	code, out, errOut = runCLI(t, "propose", "--server", srv.URL, "--token-file", tokenFile, "--json",
		"--field", capacityField, "--value", "12", "--field", "tf:infra/kafka//aws_autoscaling_group.consumer#/min_size", "--remove")
	if code != 0 || out != string(srv.accepted) {
		t.Fatalf("--json: exit %d: %s\n%q\nwant\n%q", code, errOut, out, srv.accepted)
	}
	_, body = srv.last(t)
	schematest.Validate(t, "proposal-request.schema.json", body)
	if !strings.Contains(string(body), `{"field":"tf:infra/kafka//aws_autoscaling_group.consumer#/min_size","remove":true}`) {
		t.Errorf("two claims: %s", body)
	}
	code, out, _ = runCLI(t, "propose", "--server", srv.URL, "--token-file", tokenFile, "--field", capacityField, "--value", "12")
	if code != 0 || !strings.Contains(out, "ACCEPTED  "+capacityField) || !strings.Contains(out, "until:") {
		t.Errorf("accepted: exit %d\n%s", code, out)
	}

	// Errors: the server's message and status, exit 2.
	n := srv.count()
	if code, _, errOut := runCLI(t, "propose", "--server", srv.URL, "--field", capacityField, "--value", "12"); code != exitUsage || !strings.Contains(errOut, "PARLEY_TOKEN") {
		t.Errorf("PARLEY_TOKEN missing: exit %d: %s", code, errOut)
	}
	t.Setenv("PARLEY_TOKEN", srv.token)
	if code, _, errOut := runCLI(t, "propose", "--server", srv.URL, "--field", capacityField, "--value", "12,"); code != exitUsage || !strings.Contains(errOut, "--value") {
		t.Errorf("bad --value: exit %d: %s", code, errOut)
	}
	if srv.count() != n {
		t.Errorf("bad input was sent to the server")
	}
	t.Setenv("PARLEY_TOKEN", "parley_0123456789abcdef_wrong")
	code, out, errOut = runCLI(t, "propose", "--server", srv.URL, "--json", "--field", capacityField, "--value", "12")
	if code != exitUsage || out != "" || !strings.Contains(errOut, "401 Unauthorized: the token is not valid (unknown or revoked)") {
		t.Errorf("bad token: exit %d: %s%s", code, out, errOut)
	}
	t.Setenv("PARLEY_TOKEN", "unavailable")
	if code, _, errOut := runCLI(t, "propose", "--server", srv.URL, "--field", capacityField, "--value", "12"); code != exitUsage ||
		!strings.Contains(errOut, "503 Service Unavailable: the token store is unavailable") || !strings.Contains(errOut, "retry after 5s") {
		t.Errorf("503: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "propose", "--server", srv.URL+"/elsewhere", "--field", capacityField, "--value", "12"); code != exitUsage || !strings.Contains(errOut, "404") {
		t.Errorf("404: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "propose", "--server", "ftp://x", "--field", capacityField, "--value", "12"); code != exitUsage || !strings.Contains(errOut, "--server") {
		t.Errorf("bad --server: exit %d: %s", code, errOut)
	}
	srv.Close()
	if code, _, errOut := runCLI(t, "propose", "--server", srv.URL, "--field", capacityField, "--value", "12"); code != exitFailure || !strings.Contains(errOut, srv.URL) {
		t.Errorf("server down: exit %d: %s", code, errOut)
	}
}
