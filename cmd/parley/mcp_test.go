package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/app/mcptools"
	"github.com/parleyhq/parley/internal/npmdata"
)

// buildParley builds the parley binary into a temporary directory.
func buildParley(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "parley")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build parley: %v\n%s", err, out)
	}
	return bin
}

// syncBuffer is a bytes.Buffer safe to write from a process's copier while the test reads it.
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

// mcpArgs are the arguments of parley mcp against dir as the Kafka scaling agent, at proposeAt
// (before the demo policy's freeze, so verdicts do not move with the clock).
func mcpArgs(dir string, extra ...string) []string {
	return append([]string{"mcp", "--repo", dir, "--as", agentIdentity, "--at", proposeAt}, extra...)
}

// TestMCPServerOverStdio runs the built binary as parley mcp and talks to it with the Go SDK's
// client over its standard input and output, as an agent's MCP client does.
func TestMCPServerOverStdio(t *testing.T) {
	bin := buildParley(t)
	dir, _ := demoRepo(t)
	state := filepath.Join(t.TempDir(), "drift.db")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cmd := exec.Command(bin, mcpArgs(dir, "--state", state)...)
	var logs syncBuffer
	cmd.Stderr = &logs
	client := mcp.NewClient(&mcp.Implementation{Name: "parley-test", Version: "v0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, logs.String())
	}
	closed := false
	defer func() {
		if !closed {
			cs.Close()
		}
	}()

	if info := cs.InitializeResult().ServerInfo; info.Name != "parley" {
		t.Errorf("server %+v", info)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("%s: no description or schemas", tool.Name)
		}
	}
	if strings.Join(names, " ") != "explain_field list_claims propose_change yield_field" {
		t.Errorf("tools %v", names)
	}

	call := func(name string, args map[string]any, out any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, logs.String())
		}
		if out != nil {
			if res.IsError {
				t.Fatalf("%s %v: tool error %s", name, args, mcpText(res))
			}
			b, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatalf("%s: %s: %v", name, b, err)
			}
		}
		return res
	}

	var refused mcptools.ProposeOutput
	call("propose_change", map[string]any{"field": capacityField, "value": 24, "intent": "performance"}, &refused)
	if refused.Accepted || refused.Decision != "veto" || refused.Rule != "bounds" || refused.Holder == nil || string(refused.Holder.Value) != "5" ||
		refused.Holder.Actor.PolicyActor != "git" || !strings.Contains(refused.Explanation, "above the maximum 16") ||
		refused.Repository != "local/infra" || !strings.HasPrefix(refused.Proposal, "prop-") {
		t.Errorf("24: %+v", refused)
	}

	var accepted mcptools.ProposeOutput
	call("propose_change", map[string]any{"field": capacityField, "value": 12, "intent": "performance",
		"motivation": map[string]any{"kind": "incident", "ref": "INC-7"}, "expires": "4h", "idempotency_key": "scale-12"}, &accepted)
	if !accepted.Accepted || accepted.Decision != "yield" || accepted.Until != "2026-11-20T14:06:00Z" || accepted.Holder != nil {
		t.Errorf("12 for 4h: %+v", accepted)
	}

	// The accepted claim stands: the field is explained as the agent's until the expiry.
	var explained mcptools.ExplainOutput
	call("explain_field", map[string]any{"field": capacityField}, &explained)
	if explained.Field != capacityField || explained.Decision != "yield" || explained.Winner == nil || string(explained.Winner.Value) != "12" ||
		explained.Winner.Actor.PolicyActor != "kafka-agent" || explained.Until != "2026-11-20T14:06:00Z" || !strings.Contains(explained.Explanation, "kafka-agent") {
		t.Errorf("explain: %+v", explained)
	}

	var claims mcptools.ClaimsOutput
	call("list_claims", map[string]any{"pattern": "tf:**//aws_autoscaling_group.*#/*"}, &claims)
	byField := map[string]mcptools.FieldClaims{}
	for _, f := range claims.Fields {
		byField[f.Field] = f
	}
	capacity := byField[capacityField]
	if claims.More || len(claims.Fields) < 3 || capacity.Git == nil || string(capacity.Git.Value) != "5" || len(capacity.Live) != 1 ||
		string(capacity.Live[0].Value) != "12" || capacity.Live[0].Evidence == nil || len(capacity.Live[0].Evidence.EventIDs) != 1 ||
		capacity.Live[0].Evidence.EventIDs[0] != accepted.Proposal {
		t.Errorf("list_claims: %+v", claims)
	}
	if f, ok := byField["tf:infra/kafka//aws_autoscaling_group.consumer#/max_size"]; !ok || f.Git == nil || string(f.Git.Value) != "16" || len(f.Live) != 0 {
		t.Errorf("max_size: %+v", f)
	}
	call("list_claims", map[string]any{"pattern": "tf:**//aws_autoscaling_group.*#/*", "limit": 1}, &claims)
	if len(claims.Fields) != 1 || !claims.More {
		t.Errorf("limit 1: %+v", claims)
	}

	var yielded mcptools.ProposeOutput
	call("yield_field", map[string]any{"field": capacityField}, &yielded)
	if yielded.Field != capacityField || yielded.Decision == "" || yielded.Explanation == "" {
		t.Errorf("yield: %+v", yielded)
	}

	for _, tt := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"propose_change", map[string]any{"field": "desired_capacity", "value": 12}, "field address"},
		{"propose_change", map[string]any{"field": capacityField, "value": 12, "expr": "var.n"}, "not both"},
		{"propose_change", map[string]any{"field": capacityField, "value": 12, "expires": "tomorrow"}, "expires"},
		{"propose_change", map[string]any{"field": capacityField, "value": 12, "repository": "acme/other"}, "unknown repository"},
		{"list_claims", map[string]any{"pattern": "tf:[//"}, "pattern"},
	} {
		res := call(tt.tool, tt.args, nil)
		if !res.IsError || !strings.Contains(mcpText(res), tt.want) {
			t.Errorf("%s %v: isError %v %q; want a tool error saying %q", tt.tool, tt.args, res.IsError, mcpText(res), tt.want)
		}
	}

	// Closing standard input ends the server cleanly; its logs went to standard error.
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	closed = true
	if cmd.ProcessState == nil || !cmd.ProcessState.Success() {
		t.Errorf("parley mcp exited %v\n%s", cmd.ProcessState, logs.String())
	}
	for _, want := range []string{"serving on stdio", "proposal judged", "rule=bounds", "the client closed the connection"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, logs.String())
		}
	}
	// The accepted proposal was recorded in --state, as parley propose --state records it.
	code, out, errOut := runCLI(t, "verdicts", "--state", state)
	if code != 0 || !strings.Contains(out, "proposed and accepted") || !strings.Contains(out, "proposal/"+accepted.Proposal) {
		t.Errorf("verdicts in the state: exit %d\n%s%s", code, out, errOut)
	}
}

func mcpText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestMCPNpmClient: the Model Context Protocol's own TypeScript SDK (from npm) spawns the built
// parley mcp with its StdioClientTransport, lists the tools and proposes, as a Node agent would.
func TestMCPNpmClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: ", err)
	}
	sdk := npmdata.RequireInstalled(t, npmdata.MCPSDK)
	bin := buildParley(t)
	dir, _ := demoRepo(t)

	work := t.TempDir()
	// The script resolves the SDK as any Node project does, from its node_modules.
	if err := os.Symlink(filepath.Join(sdk, "node_modules"), filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	script := writeFile(t, filepath.Join(work, "client.mjs"), `import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = JSON.parse(process.env.PARLEY_MCP_COMMAND);
const calls = JSON.parse(process.env.PARLEY_MCP_CALLS);
const transport = new StdioClientTransport({ command, args, stderr: "inherit" });
const client = new Client({ name: "parley-npm-test", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
const results = [];
for (const c of calls) {
  const r = await client.callTool({ name: c.name, arguments: c.arguments });
  results.push({
    name: c.name,
    isError: r.isError ?? false,
    structuredContent: r.structuredContent ?? null,
    text: r.content.filter((x) => x.type === "text").map((x) => x.text).join("\n"),
  });
}
console.log(JSON.stringify({
  server: client.getServerVersion(),
  tools: tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema, outputSchema: t.outputSchema })),
  results,
}));
await client.close();
`)
	command, _ := json.Marshal(append([]string{bin}, mcpArgs(dir)...))
	calls, _ := json.Marshal([]map[string]any{
		{"name": "propose_change", "arguments": map[string]any{"field": capacityField, "value": 24, "intent": "performance"}},
		{"name": "propose_change", "arguments": map[string]any{"field": capacityField, "value": 12, "intent": "performance", "expires": "4h"}},
		{"name": "propose_change", "arguments": map[string]any{"field": "no such field", "value": 12}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PARLEY_MCP_COMMAND="+string(command), "PARLEY_MCP_CALLS="+string(calls))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node client: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var got struct {
		Server struct{ Name string }
		Tools  []struct {
			Name                      string
			Description               string
			InputSchema, OutputSchema map[string]any
		}
		Results []struct {
			Name              string
			IsError           bool
			StructuredContent *mcptools.ProposeOutput
			Text              string
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("node client output: %v\n%s", err, stdout.String())
	}
	if got.Server.Name != "parley" || len(got.Tools) != 4 {
		t.Errorf("server %q, %d tools", got.Server.Name, len(got.Tools))
	}
	for _, tool := range got.Tools {
		if tool.Description == "" || tool.InputSchema["type"] != "object" || tool.OutputSchema["type"] != "object" {
			t.Errorf("tool %s as the TypeScript client sees it: %+v", tool.Name, tool)
		}
	}
	if len(got.Results) != 3 {
		t.Fatalf("results: %+v", got.Results)
	}
	refused, accepted, bad := got.Results[0], got.Results[1], got.Results[2]
	if refused.IsError || refused.StructuredContent == nil || refused.StructuredContent.Accepted || refused.StructuredContent.Rule != "bounds" ||
		refused.StructuredContent.Holder == nil || !strings.Contains(refused.Text, `"accepted":false`) {
		t.Errorf("24: %+v", refused)
	}
	if accepted.IsError || accepted.StructuredContent == nil || !accepted.StructuredContent.Accepted || accepted.StructuredContent.Decision != "yield" ||
		accepted.StructuredContent.Until != "2026-11-20T14:06:00Z" {
		t.Errorf("12 for 4h: %+v", accepted)
	}
	if !bad.IsError || !strings.Contains(bad.Text, "field address") {
		t.Errorf("a bad field: %+v", bad)
	}
	if !strings.Contains(stderr.String(), "serving on stdio") {
		t.Errorf("the server's logs did not reach standard error: %s", stderr.String())
	}
}

func TestMCPHelpAndBadInput(t *testing.T) {
	code, out, _ := runCLI(t, "mcp", "--help")
	for _, want := range []string{"mcpServers", `"command": "parley"`, "propose_change", "--state", "Examples:", "standard output is the protocol"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("mcp --help: exit %d, lacks %q", code, want)
		}
	}
	dir, _ := demoRepo(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp", "--repo", dir}, "--as SOURCE:ID is required"},
		{[]string{"mcp", "--repo", dir, "--as", "robot:r2"}, "unknown source"},
		{[]string{"mcp", "--repo", dir, "--as", agentIdentity, "--at", "noon"}, "--at"},
		{[]string{"mcp", "--repo", t.TempDir(), "--as", agentIdentity}, "repository"},
	} {
		code, out, errOut := runCLI(t, tt.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 saying %q", tt.args, code, out, errOut, tt.want)
		}
	}
}
