package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/app/mcptools"
)

// bearer adds the agent's token to every request of the MCP client.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// /mcp on parley serve: the SDK's client over streamable HTTP, authenticated by the agent's token,
// proposes as the token's identity, as POST /v1/proposals does; without a valid token nothing is
// served.
func TestMCPOverHTTPActsAsTheTokensIdentity(t *testing.T) {
	_, h, _, token := proposalsSetup(t)
	srv := httptest.NewServer(&MCP{Proposals: h, Version: "test"})
	defer srv.Close()
	ctx := context.Background()
	connect := func(token string) (*mcp.ClientSession, error) {
		client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
		return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL,
			HTTPClient: &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}}}, nil)
	}
	if cs, err := connect("parley_0011223344556677_nope"); err == nil {
		cs.Close()
		t.Fatal("an unknown token connected")
	}
	cs, err := connect(token)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "explain_field,list_claims,propose_change,yield_field" {
		t.Fatalf("tools %v", names)
	}
	propose := func(args map[string]any) mcptools.ProposeOutput {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcptools.ToolPropose, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("propose_change %v: %v %+v", args, err, res)
		}
		var out mcptools.ProposeOutput
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := propose(map[string]any{"field": capacityField, "value": 24}); out.Accepted || out.Decision != "veto" || out.Holder == nil {
		t.Fatalf("24: %+v", out)
	}
	out := propose(map[string]any{"field": capacityField, "value": 12, "expires": "4h", "idempotency_key": "mcp-12"})
	if !out.Accepted || out.Until == "" || out.Repository != "acme/infra" {
		t.Fatalf("12: %+v", out)
	}
	if p, ok, err := h.Agents.Lookup(ctx, mustTokenID(t, h, token), "mcp-12"); err != nil || !ok || p.ID != out.Proposal || p.Accepted != 1 {
		t.Fatalf("the MCP proposal is not logged: %+v %v %v", p, ok, err)
	}
	// The same key for another change is refused, not answered under the first one's id.
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcptools.ToolPropose, Arguments: map[string]any{"field": capacityField, "value": 13, "idempotency_key": "mcp-12"}}); err != nil ||
		!res.IsError || !strings.Contains(toolText(res), "different proposal") {
		t.Fatalf("a reused key: %v %+v", err, res)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcptools.ToolExplain, Arguments: map[string]any{"field": capacityField}})
	if err != nil || res.IsError {
		t.Fatalf("explain_field: %v %+v", err, res)
	}
	if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), "kafka-agent") {
		t.Fatalf("explain_field does not show the agent holding the field: %s", b)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcptools.ToolPropose, Arguments: map[string]any{"field": capacityField, "value": 1, "repository": "acme/nowhere"}})
	if err != nil || !res.IsError {
		t.Fatalf("an unknown repository must be a tool error: %v %+v", err, res)
	}
}

// TestMCPOverHTTPRefusesDuplicateKeys: a JSON-RPC request naming a key twice (here the tool's
// name: explain, or propose?) is answered 400 with a JSON-RPC error naming the key, and nothing
// is proposed.
func TestMCPOverHTTPRefusesDuplicateKeys(t *testing.T) {
	_, h, _, token := proposalsSetup(t)
	srv := httptest.NewServer(&MCP{Proposals: h, Version: "test"})
	defer srv.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"explain_field","name":"propose_change",` +
		`"arguments":{"field":"` + capacityField + `","value":12,"idempotency_key":"dup-1"}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var rpc struct {
		ID    any `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &rpc); err != nil || resp.StatusCode != http.StatusBadRequest || rpc.Error.Code != -32600 ||
		!strings.Contains(rpc.Error.Message, `duplicate key "name" in the object at $.params`) {
		t.Fatalf("%d %s (%v)", resp.StatusCode, b, err)
	}
	if _, ok, err := h.Agents.Lookup(context.Background(), mustTokenID(t, h, token), "dup-1"); err != nil || ok {
		t.Fatalf("the refused request was proposed: %v %v", ok, err)
	}
}

func mustTokenID(t *testing.T, h *Proposals, token string) string {
	t.Helper()
	tok, err := h.Agents.Verify(context.Background(), token, h.now())
	if err != nil {
		t.Fatal(err)
	}
	return tok.ID
}

// toolText is the text of a tool result's content.
func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
