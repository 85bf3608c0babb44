package mcptools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/app/mcptools"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile"
)

const capacityField = "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity"

var (
	now   = time.Date(2026, 11, 20, 10, 6, 0, 0, time.UTC)
	agent = core.Identity{Source: core.SourceAWSPrincipal, ID: "arn:aws:iam::123456789012:role/kafka-scaling-agent"}
)

// fakeBackend judges like the demo policy's bounds on the Kafka consumers' capacity (at most 16,
// Git holds 5) and records every call.
type fakeBackend struct {
	mu    sync.Mutex
	calls []string
	// proposed are the claims of every Propose call; keys their idempotency keys.
	proposed [][]core.Claim
	keys     []string
	limits   []int
}

func (b *fakeBackend) record(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, fmt.Sprintf(format, args...))
}

func (b *fakeBackend) Calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.calls...)
}

func (b *fakeBackend) Identity() core.Identity { return agent }
func (b *fakeBackend) Now() time.Time          { return now }

func (b *fakeBackend) repo(repository string) (string, error) {
	switch repository {
	case "", "acme/infra":
		return "acme/infra", nil
	}
	return "", fmt.Errorf("repository %q: %w (this server judges acme/infra)", repository, mcptools.ErrUnknownRepository)
}

func gitClaim(f core.Field, value string) core.Claim {
	v, _ := core.ParseJSONValue([]byte(value))
	return core.Claim{Field: f, Actor: core.Actor{Name: "git", Identity: core.Identity{Source: core.SourceGitAuthor, ID: "dana@parley.example"}},
		Value: v, Intent: "baseline", At: now.Add(-24 * time.Hour), Evidence: core.Evidence{Source: "git", Commit: "a1b2c3d"}}
}

func (b *fakeBackend) Propose(_ context.Context, repository, key string, claims []core.Claim) (mcptools.Proposal, error) {
	b.record("propose %s %s", repository, key)
	b.mu.Lock()
	b.proposed, b.keys = append(b.proposed, claims), append(b.keys, key)
	b.mu.Unlock()
	repo, err := b.repo(repository)
	if err != nil {
		return mcptools.Proposal{}, err
	}
	p := mcptools.Proposal{ID: "prop-" + key, Repository: repo}
	for _, c := range claims {
		c.Actor.Name = "kafka-agent"
		git := gitClaim(c.Field, "5")
		v := core.Verdict{Field: c.Field, Decision: core.DecisionYield, Rule: "rank", Winner: &c, Until: c.Expires,
			Explanation: []core.Step{{Rule: "rank", Outcome: "decided", Detail: "performance outranks baseline"}}}
		if c.Yield {
			v = core.Verdict{Field: c.Field, Decision: core.DecisionEnforceGit, Rule: "yield", Winner: &git,
				Explanation: []core.Step{{Rule: "yield", Outcome: "decided", Detail: "kafka-agent gives the field up"}}}
		} else if n, err := json.Number(c.Value.JSON()).Int64(); err == nil && n > 16 {
			v = core.Verdict{Field: c.Field, Decision: core.DecisionVeto, Rule: "bounds", Winner: &git,
				Explanation: []core.Step{{Rule: "bounds", Outcome: "vetoed", Detail: fmt.Sprintf("kafka-agent wants %d, above the maximum 16", n)}}}
		}
		r := reconcile.Proposed{Claim: c, Verdict: v, Accepted: v.Winner.Actor.Identity.String() == c.Actor.Identity.String()}
		if !r.Accepted {
			r.Holder = v.Winner
		}
		p.Results = append(p.Results, r)
	}
	return p, nil
}

func (b *fakeBackend) Explain(_ context.Context, repository string, f core.Field) (core.Verdict, error) {
	b.record("explain %s %s", repository, f)
	if _, err := b.repo(repository); err != nil {
		return core.Verdict{}, err
	}
	git := gitClaim(f, "5")
	return core.Verdict{Field: f, Decision: core.DecisionEnforceGit, Rule: "no-contest", Winner: &git,
		Explanation: []core.Step{{Rule: "no-contest", Outcome: "decided", Detail: "only Git claims the field"}}}, nil
}

func (b *fakeBackend) Claims(_ context.Context, repository string, p core.FieldPattern, limit int) ([]reconcile.Holders, bool, error) {
	b.record("claims %s %s %d", repository, p.Field, limit)
	b.mu.Lock()
	b.limits = append(b.limits, limit)
	b.mu.Unlock()
	if _, err := b.repo(repository); err != nil {
		return nil, false, err
	}
	var out []reconcile.Holders
	for _, attr := range []string{"desired_capacity", "max_size", "min_size"} {
		f, _ := core.ParseField("tf:infra/kafka//aws_autoscaling_group.consumer#/" + attr)
		g := gitClaim(f, "4")
		h := reconcile.Holders{Field: f, Git: &g}
		if attr == "desired_capacity" {
			v, _ := core.ParseJSONValue([]byte("12"))
			h.Live = []core.Claim{{Field: f, Actor: core.Actor{Name: "kafka-agent", Identity: agent}, Value: v, Intent: "performance",
				Motivation: core.Motivation{Kind: "incident", Ref: "INC-7"}, At: now, Expires: now.Add(4 * time.Hour),
				Evidence: core.Evidence{Source: reconcile.EvidenceProposal, EventIDs: []string{"prop-1"}}}}
		}
		out = append(out, h)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

func connect(t *testing.T, b mcptools.Backend) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := mcptools.NewServer(b, "test").Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and decodes its structured result into out; it fails the test on a protocol
// error and on a tool error.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res := callRaw(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s %v: tool error: %s", name, args, text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: structured result %s: %v", name, b, err)
	}
	// The text content is the same JSON, for clients that read only text.
	var fromText any
	if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil {
		t.Errorf("%s: text content is not the JSON result: %v", name, err)
	}
	return res
}

func callRaw(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: protocol error: %v", name, args, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestMCPListToolsDescribesEveryTool(t *testing.T) {
	cs := connect(t, &fakeBackend{})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cs.InitializeResult(); got.ServerInfo.Name != "parley" || got.ServerInfo.Version != "test" ||
		!strings.Contains(got.Instructions, "do not carry out the change") {
		t.Errorf("server info %+v, instructions %q", got.ServerInfo, got.Instructions)
	}
	type schema struct {
		Type       string `json:"type"`
		Required   []string
		Properties map[string]struct {
			Description string `json:"description"`
			Type        any    `json:"type"`
			Enum        []any  `json:"enum"`
			Maximum     *float64
			Default     any
			Properties  map[string]struct {
				Description string `json:"description"`
				Enum        []any  `json:"enum"`
			}
		}
	}
	tools := map[string]*mcp.Tool{}
	schemas := map[string][2]schema{}
	for _, tool := range res.Tools {
		tools[tool.Name] = tool
		var in, out schema
		for i, s := range []any{tool.InputSchema, tool.OutputSchema} {
			b, _ := json.Marshal(s)
			if err := json.Unmarshal(b, []*schema{&in, &out}[i]); err != nil {
				t.Fatalf("%s: schema %s: %v", tool.Name, b, err)
			}
		}
		schemas[tool.Name] = [2]schema{in, out}
		if len(tool.Description) < 200 {
			t.Errorf("%s: description too thin for a model to act on: %q", tool.Name, tool.Description)
		}
		if in.Type != "object" || out.Type != "object" {
			t.Errorf("%s: input schema %q, output schema %q; want objects", tool.Name, in.Type, out.Type)
		}
		for name, p := range in.Properties {
			if p.Description == "" {
				t.Errorf("%s: input %s has no description", tool.Name, name)
			}
		}
		for name, p := range out.Properties {
			if p.Description == "" {
				t.Errorf("%s: output %s has no description", tool.Name, name)
			}
		}
	}
	if len(tools) != 4 || tools["propose_change"] == nil || tools["explain_field"] == nil || tools["list_claims"] == nil || tools["yield_field"] == nil {
		t.Fatalf("tools: %v", tools)
	}
	if !strings.Contains(tools["propose_change"].Description, "do NOT carry out the change") ||
		!strings.Contains(tools["propose_change"].Description, "until when") {
		t.Errorf("propose_change does not say a refusal must not be carried out and who holds the field until when: %q", tools["propose_change"].Description)
	}
	if a := tools["explain_field"].Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("explain_field is not marked read-only: %+v", a)
	}
	if a := tools["propose_change"].Annotations; a == nil || a.ReadOnlyHint {
		t.Errorf("propose_change is marked read-only: %+v", a)
	}

	in, out := schemas["propose_change"][0], schemas["propose_change"][1]
	if strings.Join(in.Required, ",") != "field" {
		t.Errorf("propose_change requires %v, want field only", in.Required)
	}
	for key, wants := range map[string][]string{
		"field":           {"tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity", "k8s:"},
		"value":           {"JSON", "not both"},
		"expires":         {"4h", "RFC 3339"},
		"intent":          {"performance"},
		"motivation":      {"incident"},
		"idempotency_key": {"retry"},
		"repository":      {"owner/name"},
	} {
		for _, want := range wants {
			if !strings.Contains(in.Properties[key].Description, want) {
				t.Errorf("propose_change input %s: %q lacks %q", key, in.Properties[key].Description, want)
			}
		}
	}
	if in.Properties["value"].Type != nil {
		t.Errorf("value is restricted to %v, want any JSON", in.Properties["value"].Type)
	}
	if sev := in.Properties["motivation"].Properties["severity"].Enum; len(sev) != 4 {
		t.Errorf("severity enum %v", sev)
	}
	for key, wants := range map[string][]string{
		"accepted": {"must not be carried out", "holder"},
		"holder":   {"who holds the field", "until when"},
		"until":    {"RFC 3339"},
		"decision": {"veto"},
	} {
		for _, want := range wants {
			if !strings.Contains(out.Properties[key].Description, want) {
				t.Errorf("propose_change output %s: %q lacks %q", key, out.Properties[key].Description, want)
			}
		}
	}
	for _, key := range []string{"proposal", "repository", "accepted", "decision", "rule", "until", "holder", "explanation"} {
		if _, ok := out.Properties[key]; !ok {
			t.Errorf("propose_change output has no %s", key)
		}
	}
	if lim := schemas["list_claims"][0].Properties["limit"]; lim.Maximum == nil || *lim.Maximum != 200 || fmt.Sprint(lim.Default) != "50" {
		t.Errorf("list_claims limit: max %v, default %v", lim.Maximum, lim.Default)
	}
	if !strings.Contains(schemas["list_claims"][0].Properties["pattern"].Description, "**") {
		t.Errorf("list_claims pattern is not explained")
	}
	if _, ok := schemas["yield_field"][0].Properties["expires"]; !ok {
		t.Errorf("yield_field has no expires")
	}
}

func TestMCPProposeChange(t *testing.T) {
	b := &fakeBackend{}
	cs := connect(t, b)

	var refused mcptools.ProposeOutput
	call(t, cs, "propose_change", map[string]any{"field": capacityField, "value": 24, "intent": "performance"}, &refused)
	if refused.Accepted || refused.Decision != "veto" || refused.Rule != "bounds" || refused.Repository != "acme/infra" ||
		refused.Field != capacityField || refused.Holder == nil || string(refused.Holder.Value) != "5" || refused.Holder.Actor.PolicyActor != "git" ||
		!strings.Contains(refused.Explanation, "above the maximum 16") {
		t.Errorf("24: %+v", refused)
	}

	var accepted mcptools.ProposeOutput
	call(t, cs, "propose_change", map[string]any{"field": capacityField, "value": 12, "intent": "performance",
		"motivation": map[string]any{"kind": "incident", "ref": "INC-7", "severity": "high"}, "expires": "4h",
		"idempotency_key": "scale-12", "repository": "acme/infra"}, &accepted)
	if !accepted.Accepted || accepted.Decision != "yield" || accepted.Until != "2026-11-20T14:06:00Z" || accepted.Holder != nil ||
		accepted.Proposal != "prop-scale-12" {
		t.Errorf("12 for 4h: %+v", accepted)
	}
	// The claim is made as the proposals API makes it: the backend's identity, at its time.
	c := b.proposed[1][0]
	if c.Actor.Identity.String() != agent.String() || c.Field.String() != capacityField || c.Value.JSON() != "12" || c.Intent != "performance" ||
		c.Motivation != (core.Motivation{Kind: "incident", Ref: "INC-7", Severity: "high"}) || !c.At.Equal(now) || !c.Expires.Equal(now.Add(4*time.Hour)) ||
		b.keys[1] != "scale-12" {
		t.Errorf("claim proposed: %+v, key %q", c, b.keys[1])
	}

	// Any JSON value, an expression, and an RFC 3339 expiry.
	for _, args := range []map[string]any{
		{"field": "k8s:core/ConfigMap/prod/settings#/data", "value": map[string]any{"LOG_LEVEL": "debug"}},
		{"field": "k8s:core/ConfigMap/prod/settings#/data/LOG_LEVEL", "value": nil},
		{"field": capacityField, "expr": "var.capacity", "expires": "2026-11-20T12:00:00Z"},
	} {
		var out mcptools.ProposeOutput
		call(t, cs, "propose_change", args, &out)
	}
	if got := b.proposed[2][0].Value.JSON(); got != `{"LOG_LEVEL":"debug"}` {
		t.Errorf("object value: %s", got)
	}
	if got := b.proposed[3][0]; got.Value.JSON() != "null" || got.Value.Absent() {
		t.Errorf("null value: %+v", got.Value)
	}
	if got := b.proposed[4][0]; got.Value.Expr() != "var.capacity" || !got.Expires.Equal(time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("expr claim: %+v", got)
	}
}

func TestMCPYieldField(t *testing.T) {
	b := &fakeBackend{}
	cs := connect(t, b)
	var out mcptools.ProposeOutput
	call(t, cs, "yield_field", map[string]any{"field": capacityField, "expires": "1h"}, &out)
	c := b.proposed[0][0]
	if !c.Yield || !c.Value.Absent() || c.Actor.Identity.String() != agent.String() || !c.Expires.Equal(now.Add(time.Hour)) {
		t.Errorf("yield claim: %+v", c)
	}
	if out.Accepted || out.Decision != "enforce-git" || out.Holder == nil || out.Field != capacityField {
		t.Errorf("yield answer: %+v", out)
	}
}

func TestMCPExplainField(t *testing.T) {
	b := &fakeBackend{}
	cs := connect(t, b)
	var out mcptools.ExplainOutput
	call(t, cs, "explain_field", map[string]any{"field": capacityField}, &out)
	if out.Field != capacityField || out.Decision != "enforce-git" || out.Rule != "no-contest" || out.Winner == nil ||
		string(out.Winner.Value) != "5" || out.Winner.Evidence == nil || out.Winner.Evidence.Commit != "a1b2c3d" ||
		!strings.Contains(out.Explanation, "only Git claims the field") || out.Until != "" {
		t.Errorf("explain: %+v", out)
	}
	if got := b.Calls(); len(got) != 1 || got[0] != "explain  "+capacityField {
		t.Errorf("calls %q", got)
	}
}

func TestMCPListClaims(t *testing.T) {
	b := &fakeBackend{}
	cs := connect(t, b)
	var out mcptools.ClaimsOutput
	call(t, cs, "list_claims", map[string]any{"pattern": "tf:**//aws_autoscaling_group.*#/*"}, &out)
	if len(out.Fields) != 3 || out.More || out.Fields[0].Field != capacityField || out.Fields[0].Git == nil ||
		len(out.Fields[0].Live) != 1 || string(out.Fields[0].Live[0].Value) != "12" || out.Fields[0].Live[0].Expires != "2026-11-20T14:06:00Z" ||
		out.Fields[0].Live[0].Evidence.Proposal != "" || out.Fields[0].Live[0].Evidence.EventIDs[0] != "prop-1" ||
		out.Fields[1].Live == nil || len(out.Fields[1].Live) != 0 {
		t.Errorf("claims: %+v", out)
	}
	call(t, cs, "list_claims", map[string]any{"pattern": "tf:**//aws_autoscaling_group.*#/*", "limit": 2}, &out)
	if len(out.Fields) != 2 || !out.More {
		t.Errorf("limit 2: %+v", out)
	}
	if b.limits[0] != mcptools.DefaultLimit || b.limits[1] != 2 {
		t.Errorf("limits passed: %v", b.limits)
	}
}

// TestMCPInputErrors: what an agent can get wrong is a tool error naming the fault, never a protocol
// error, and input the tools can check reaches no backend.
func TestMCPInputErrors(t *testing.T) {
	b := &fakeBackend{}
	cs := connect(t, b)
	for _, tt := range []struct {
		tool    string
		args    map[string]any
		want    string
		backend bool // the backend is asked (and answers the error)
	}{
		{"propose_change", map[string]any{"field": "infra/kafka desired_capacity", "value": 12}, "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity", false},
		{"propose_change", map[string]any{"field": "tf:**//aws_autoscaling_group.*#/desired_capacity", "value": 12}, "field address", false},
		{"propose_change", map[string]any{"field": capacityField, "value": 12, "expr": "var.capacity"}, "value or expr, not both", false},
		{"propose_change", map[string]any{"field": capacityField}, "give value", false},
		{"propose_change", map[string]any{"field": capacityField, "value": 12, "expires": "soon"}, "expires \"soon\"", false},
		{"propose_change", map[string]any{"field": capacityField, "value": 12, "expires": "2026-11-20T09:00:00Z"}, "not in the future", false},
		{"propose_change", map[string]any{"field": capacityField, "value": 12, "motivation": map[string]any{"kind": "incident", "severity": "dire"}}, "severity", false},
		{"propose_change", map[string]any{"field": capacityField, "value": 12, "idempotency_key": strings.Repeat("k", 201)}, "idempotency_key", false},
		{"propose_change", map[string]any{"value": 12}, "field", false},
		{"propose_change", map[string]any{"field": capacityField, "value": 12, "repository": "acme/other"}, "unknown repository", true},
		{"yield_field", map[string]any{"field": "nonsense"}, "field address", false},
		{"yield_field", map[string]any{"field": capacityField, "expires": "-4h"}, "expires", false},
		{"explain_field", map[string]any{"field": "tf:infra//"}, "field address", false},
		{"explain_field", map[string]any{"field": capacityField, "repository": "acme/other"}, "unknown repository", true},
		{"list_claims", map[string]any{"pattern": "nonsense"}, "pattern \"nonsense\"", false},
		{"list_claims", map[string]any{"pattern": "tf:**//*", "limit": 500}, "limit", false},
		{"list_claims", map[string]any{"pattern": "tf:**//*", "repository": "acme/other"}, "unknown repository", true},
	} {
		before := len(b.Calls())
		res := callRaw(t, cs, tt.tool, tt.args)
		if !res.IsError || !strings.Contains(text(res), tt.want) {
			t.Errorf("%s %v: isError %v, %q; want a tool error saying %q", tt.tool, tt.args, res.IsError, text(res), tt.want)
		}
		if asked := len(b.Calls()) > before; asked != tt.backend {
			t.Errorf("%s %v: backend asked %v, want %v", tt.tool, tt.args, asked, tt.backend)
		}
	}
	// An unknown tool is the protocol's error.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_everything"}); err == nil {
		t.Error("an unknown tool answered")
	}
}

// TestMCPBackendFailureIsAToolError: a backend that cannot judge (its state is unavailable) answers
// the call with a tool error the model can read.
func TestMCPBackendFailureIsAToolError(t *testing.T) {
	cs := connect(t, failingBackend{&fakeBackend{}})
	res := callRaw(t, cs, "propose_change", map[string]any{"field": capacityField, "value": 12})
	if !res.IsError || !strings.Contains(text(res), "drift state unavailable") {
		t.Errorf("%v %q", res.IsError, text(res))
	}
}

type failingBackend struct{ *fakeBackend }

func (failingBackend) Propose(context.Context, string, string, []core.Claim) (mcptools.Proposal, error) {
	return mcptools.Proposal{}, errors.New("drift state unavailable")
}

// TestMCPRefusesDuplicateArguments: a call whose arguments name a key twice is a tool error naming
// the key, and nothing is proposed, explained or listed (the SDK's encoding/json would have kept
// the last "value", 12, while the first, 24, is what a log or a reviewer reads first).
func TestMCPRefusesDuplicateArguments(t *testing.T) {
	b := &fakeBackend{}
	cs := connect(t, b)
	for _, tc := range []struct{ tool, args, key string }{
		{"propose_change", `{"field":"` + capacityField + `","value":24,"value":12}`, "value"},
		{"propose_change", `{"field":"` + capacityField + `","value":12,"motivation":{"kind":"incident","kind":"traffic"}}`, "kind"},
		{"yield_field", `{"field":"` + capacityField + `","expires":"1h","expires":"9999h"}`, "expires"},
		{"explain_field", `{"field":"` + capacityField + `","field":"k8s:apps/Deployment/prod/web#/spec/replicas"}`, "field"},
		{"list_claims", `{"pattern":"tf:**//aws_autoscaling_group.*","limit":1,"limit":200}`, "limit"},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: json.RawMessage(tc.args)})
		if err != nil {
			t.Fatalf("%s %s: protocol error: %v", tc.tool, tc.args, err)
		}
		if !res.IsError || !strings.Contains(text(res), `duplicate key "`+tc.key+`"`) {
			t.Errorf("%s %s: %+v %s; want a tool error naming the duplicate key %q", tc.tool, tc.args, res.IsError, text(res), tc.key)
		}
	}
	if calls := b.Calls(); len(calls) != 0 {
		t.Errorf("calls with duplicate arguments reached the backend: %v", calls)
	}
}
