// Package mcptools serves Parley to AI agents over the Model Context Protocol: four tools through
// which an agent asks before it changes infrastructure (propose_change, yield_field), reads a
// field's verdict as it stands (explain_field) and finds who holds which fields (list_claims).
//
// The tools judge nothing themselves: they read the agent's input, build claims exactly as the
// proposals API does (core.ClaimJSON with the backend's identity as the actor) and hand them to a
// Backend, which judges under the repository's policy (reconcile.Reconciler's Propose, Explain and
// Claims). parley mcp serves them on stdio against a local repository; docs/agents.md describes them.
//
// Input an agent can get wrong (a bad field address or pattern, both value and expr, a bad expiry,
// an unknown repository) is answered as a tool error (a result with isError and a message saying
// what to fix), not as a protocol failure, so the model sees it and can correct itself.
package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy/arbiter"
	"github.com/parleyhq/parley/reconcile"
)

// Backend judges for the tools; the tools own this interface (parley mcp's local repository
// implements it, and so can a server's).
type Backend interface {
	// Propose judges claims by the backend's identity before they are made (reconcile.Propose
	// semantics): the accepted ones are recorded and stand until they expire. repository "" is
	// the backend's default; idempotencyKey "" asks for a fresh proposal id.
	Propose(ctx context.Context, repository, idempotencyKey string, claims []core.Claim) (Proposal, error)
	// Explain judges a field as it stands, with no new claim; nothing is recorded.
	Explain(ctx context.Context, repository string, f core.Field) (core.Verdict, error)
	// Claims lists who holds the fields matching p, at most limit of them; the bool is true when
	// more fields match.
	Claims(ctx context.Context, repository string, p core.FieldPattern, limit int) ([]reconcile.Holders, bool, error)
	// Identity is who the agent is: the actor of every claim the tools make.
	Identity() core.Identity
}

// Proposal is a judged proposal: its id, the repository it was judged against, and the verdict on
// each claim in the order proposed.
type Proposal struct {
	ID, Repository string
	Results        []reconcile.Proposed
}

// Clock is optionally implemented by a Backend whose time is not the wall clock (a replay, a
// test): claims are made at Now, and durations such as "4h" count from it.
type Clock interface {
	Now() time.Time
}

// ErrUnknownRepository is wrapped by a Backend's error for a repository it does not judge.
var ErrUnknownRepository = errors.New("unknown repository")

// Limits of list_claims.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// Tool names.
const (
	ToolPropose = "propose_change"
	ToolExplain = "explain_field"
	ToolClaims  = "list_claims"
	ToolYield   = "yield_field"
)

// Descriptions shared by several schemas.
const (
	repositoryDesc = "The GitOps repository to judge against, as owner/name (e.g. acme/infra). Omit it to use the server's repository; " +
		"a repository the server does not know is an error."
	fieldDesc = "The field's address. Terraform: tf:<module dir>//<resource address>#<JSON pointer>, e.g. " +
		"tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity. Kubernetes: k8s:<group>/<Kind>/<namespace>/<name>#<JSON pointer>, " +
		"e.g. k8s:apps/Deployment/prod/web#/spec/replicas (group core for the core API group). No wildcards; " +
		"list_claims takes patterns and lists the addresses that exist."
	untilDesc = "RFC 3339 UTC time when the decision ends: an accepted claim's expiry (the field must be left alone or handed back then), " +
		"or when a hold on the field lifts. Absent: open-ended."
	explanationDesc = "The verdict in words for a person or a model: the decision, who wins and every rule's outcome (why)."
	decisionDesc    = "The policy's decision on the field: yield (the winner holds the field live until 'until'; Git is told to leave it alone), " +
		"adopt (the live value is written into Git), enforce-git (Git's value stands; live changes are reverted), veto (the claim is refused " +
		"outright: bounds, immutability, an actor not allowed to write the field or assert its reason, a freeze), hold (the field is frozen " +
		"at its current value, e.g. after oscillation) or escalate (humans are asked to decide)."
	ruleDesc = "The rule or check that decided, e.g. bounds, rank, writers, immutable, freeze.<name>, rule.<name>, oscillation."
)

// Motivation is why a change is made now.
type Motivation struct {
	Kind     string `json:"kind" jsonschema:"What prompted the change, one of the motivations the repository's policy defines, e.g. incident, traffic, cve, launch, budget, maintenance, rightsizing. The policy says which actors may assert which (an agent asserting one it may not is downgraded, as the explanation says)."`
	Ref      string `json:"ref,omitempty" jsonschema:"A reference for the motivation: an incident id (INC-4211), a ticket, a CVE id."`
	Severity string `json:"severity,omitempty" jsonschema:"How severe: low, medium, high or critical."`
}

// ProposeInput is propose_change's input.
type ProposeInput struct {
	Repository     string          `json:"repository,omitempty"`
	Field          string          `json:"field"`
	Value          json.RawMessage `json:"value,omitempty" jsonschema:"The value the field should take, as plain JSON of the field's type: 12, \"m5.large\", true, {\"cpu\": \"2\"}. JSON null sets the field to null. Give value or expr, not both."`
	Expr           string          `json:"expr,omitempty" jsonschema:"Instead of value: a Terraform expression that is not a literal, e.g. var.capacity or local.size * 2."`
	Intent         string          `json:"intent,omitempty" jsonschema:"Why the change is made, one of the intents the repository's policy ranks, e.g. availability, performance, cost, security, reliability. Omitted: the agent's default intent in the policy. When no rule decides, the higher-ranked intent wins."`
	Motivation     *Motivation     `json:"motivation,omitempty" jsonschema:"Why now: what prompted the change (an incident, traffic, a CVE, a budget)."`
	Expires        string          `json:"expires,omitempty" jsonschema:"When the claim ends and the field is handed back: a duration from now such as 30m, 4h or 24h, or an RFC 3339 time such as 2026-11-20T14:00:00Z. Omitted: the policy's default lifetime for the motivation, else until replaced. Ask for no longer than the change is needed."`
	IdempotencyKey string          `json:"idempotency_key,omitempty" jsonschema:"A key (at most 200 characters) that makes a retry of the same proposal record its claim once under the same proposal id: use one per intended change, e.g. scale-consumers-INC-4211."`
}

// YieldInput is yield_field's input.
type YieldInput struct {
	Repository     string `json:"repository,omitempty"`
	Field          string `json:"field"`
	Expires        string `json:"expires,omitempty" jsonschema:"How long the agent gives the field up: a duration from now such as 4h, or an RFC 3339 time. Omitted: until the agent claims the field again."`
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"A key (at most 200 characters) that makes a retry record the yield once."`
}

// ProposeOutput is the answer of propose_change and yield_field: the verdict on the one claim,
// with the names of POST /v1/proposals's answer (app.ProposalResponse, app.ProposalVerdict).
type ProposeOutput struct {
	Proposal    string          `json:"proposal" jsonschema:"The proposal's id (prop-...). An accepted claim carries it as evidence; the change that follows is recognised as the one asked for."`
	Repository  string          `json:"repository" jsonschema:"The repository (owner/name) the proposal was judged against."`
	Field       string          `json:"field" jsonschema:"The field's address, canonical."`
	Accepted    bool            `json:"accepted" jsonschema:"true: the claim wins the field; the change may be made now, and the claim stands until 'until' (recorded before this answer). false: REFUSED; the change must not be carried out: 'holder' says who holds the field, why and until when, and 'explanation' every rule's outcome. Making a refused change anyway is judged like any unasked change and can be vetoed and reverted."`
	Decision    string          `json:"decision" jsonschema:"The policy's decision: yield or adopt when accepted; veto, enforce-git, yield (to another holder), hold or escalate when refused."`
	Rule        string          `json:"rule"`
	Until       string          `json:"until,omitempty"`
	Holder      *core.ClaimJSON `json:"holder,omitempty" jsonschema:"When refused: who holds the field instead (Git's claim, or another actor's live claim): the actor, the value it holds, why (intent, motivation) and until when (expires; absent: until replaced)."`
	Explanation string          `json:"explanation"`
}

// ExplainInput is explain_field's input.
type ExplainInput struct {
	Repository string `json:"repository,omitempty"`
	Field      string `json:"field"`
}

// ExplainOutput is explain_field's answer.
type ExplainOutput struct {
	Field       string          `json:"field" jsonschema:"The field's address, canonical."`
	Decision    string          `json:"decision"`
	Rule        string          `json:"rule"`
	Winner      *core.ClaimJSON `json:"winner,omitempty" jsonschema:"The claim that holds the field now (Git's, or a live actor's): who, what value, why and until when. Absent when nothing holds it (e.g. a veto with no standing claim)."`
	Until       string          `json:"until,omitempty"`
	Explanation string          `json:"explanation"`
}

// ClaimsInput is list_claims' input.
type ClaimsInput struct {
	Repository string `json:"repository,omitempty"`
	Pattern    string `json:"pattern" jsonschema:"A field pattern: a field address where * matches any run of characters within one segment and ** a whole module directory or pointer token and any number of them; without # it matches every field of the objects it names. E.g. tf:**//aws_autoscaling_group.*#/* (every top-level attribute of every autoscaling group), tf:infra/kafka//aws_autoscaling_group.consumer, k8s:apps/Deployment/prod/*#/spec/replicas."`
	Limit      int    `json:"limit,omitempty" jsonschema:"At most this many fields, in the repository's order (default 50, at most 200); 'more' says whether more matched: narrow the pattern to see them."`
}

// FieldClaims is who holds one field.
type FieldClaims struct {
	Field string           `json:"field" jsonschema:"The field's address."`
	Git   *core.ClaimJSON  `json:"git,omitempty" jsonschema:"Git's claim: the value the repository declares, with the commit that set it and why (intent, motivation)."`
	Live  []core.ClaimJSON `json:"live" jsonschema:"The standing live claims, the latest of each actor: changes made outside Git and accepted proposals, each with who, what value, why and until when (expires). Empty: only Git holds the field."`
}

// ClaimsOutput is list_claims' answer.
type ClaimsOutput struct {
	Fields []FieldClaims `json:"fields" jsonschema:"The matching fields that Git declares, in the repository's order."`
	More   bool          `json:"more" jsonschema:"true when more fields match than were listed (limit)."`
}

// NewServer returns an MCP server named parley, of the given version, with the four tools served
// by b.
func NewServer(b Backend, version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "parley", Title: "Parley", Version: version}, &mcp.ServerOptions{
		Instructions: "Parley decides whose change to an infrastructure field wins, under the repository's policy. " +
			"Before changing any field of the infrastructure (a Terraform attribute, a Kubernetes object field) through a cloud API or kubectl, " +
			"call " + ToolPropose + " with the field and the value you want, your intent, motivation and how long you need it. " +
			"If the answer is accepted: false, do not carry out the change: the answer names who holds the field, why and until when. " +
			"Use " + ToolExplain + " to see why a field has its value, " + ToolClaims + " to find the fields and who holds them, and " +
			ToolYield + " to hand a field back when you no longer need it.",
	})
	t := tools{b: b}
	falseP := false
	mcp.AddTool(s, &mcp.Tool{
		Name:  ToolPropose,
		Title: "Propose a change to an infrastructure field",
		Description: "Ask Parley BEFORE changing an infrastructure field: is this change allowed now? The claim (this agent wants the field " +
			"to have this value, for this intent and motivation, until expires) is judged under the repository's policy against Git's " +
			"value and the standing claims of other actors (people, autoscalers, other agents). The answer says accepted true or false. " +
			"Accepted: make the change now; the claim is recorded and stands until 'until', after which the field is handed back. " +
			"Refused (accepted false): do NOT carry out the change; 'holder' names who holds the field instead, why, and until when, and " +
			"'explanation' gives every rule's outcome (e.g. a value above the maximum the Terraform code allows). Propose a value within the " +
			"limits the explanation names, wait until the holder's claim ends, or leave the field alone. One field per call.",
		Annotations: &mcp.ToolAnnotations{Title: "Propose a change", DestructiveHint: &falseP, OpenWorldHint: &falseP},
		InputSchema: inputSchema[ProposeInput](),
		OutputSchema: outputSchema[ProposeOutput](map[string]string{
			"rule": ruleDesc, "until": untilDesc, "explanation": explanationDesc,
		}),
	}, uniqueArguments(t.propose))
	mcp.AddTool(s, &mcp.Tool{
		Name:  ToolYield,
		Title: "Give an infrastructure field up",
		Description: "Hand a field back: this agent yields it (until expires, or until it proposes a change again), so that Git's value or " +
			"another actor's claim holds it. Call it when a change you proposed is no longer needed (the incident is over, the load has " +
			"passed), rather than waiting for the claim to expire. Answered like " + ToolPropose + ".",
		Annotations: &mcp.ToolAnnotations{Title: "Give a field up", DestructiveHint: &falseP, OpenWorldHint: &falseP},
		InputSchema: inputSchema[YieldInput](),
		OutputSchema: outputSchema[ProposeOutput](map[string]string{
			"rule": ruleDesc, "until": untilDesc, "explanation": explanationDesc,
		}),
	}, uniqueArguments(t.yield))
	mcp.AddTool(s, &mcp.Tool{
		Name:  ToolExplain,
		Title: "Explain an infrastructure field",
		Description: "The verdict on a field as it stands now, with no new claim: who holds it (Git or a live actor), what value, why, until when, " +
			"and every rule's outcome. Read-only: nothing is recorded. Call it to understand why a field has its value, or who you would " +
			"have to wait for, before proposing a change.",
		Annotations: &mcp.ToolAnnotations{Title: "Explain a field", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &falseP},
		InputSchema: inputSchema[ExplainInput](),
		OutputSchema: outputSchema[ExplainOutput](map[string]string{
			"decision": decisionDesc, "rule": ruleDesc, "until": untilDesc, "explanation": explanationDesc,
		}),
	}, uniqueArguments(t.explain))
	mcp.AddTool(s, &mcp.Tool{
		Name:  ToolClaims,
		Title: "List who holds infrastructure fields",
		Description: "For the fields Git declares that match a pattern: Git's claim (the declared value, commit and reason) and the standing " +
			"live claims (who changed or was allowed to change the field outside Git, to what, why, until when). Read-only. Call it to find " +
			"a field's exact address before " + ToolPropose + ", or to see which fields another actor holds.",
		Annotations:  &mcp.ToolAnnotations{Title: "List claims", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &falseP},
		InputSchema:  inputSchema[ClaimsInput](),
		OutputSchema: outputSchema[ClaimsOutput](nil),
	}, uniqueArguments(t.claims))
	return s
}

type tools struct{ b Backend }

// uniqueArguments refuses a call whose arguments name a key twice, as every other intake does
// (core.UniqueKeys): the SDK decodes them with encoding/json, which keeps the last silently, so an
// agent's log or a reviewer reading the first "value" would see another call than the one made.
// It is checked here, on the arguments as they arrived, so that both transports (stdio and
// serve's /mcp) refuse alike.
func uniqueArguments[In, Out any](h mcp.ToolHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		if req != nil && req.Params != nil {
			if err := core.UniqueKeys(req.Params.Arguments); errors.Is(err, core.ErrDuplicateKey) {
				var none Out
				return nil, none, fmt.Errorf("the arguments of %s: %w: name each argument once", req.Params.Name, err)
			}
		}
		return h(ctx, req, in)
	}
}

func (t tools) now() time.Time {
	if c, ok := t.b.(Clock); ok {
		return c.Now().UTC()
	}
	return time.Now().UTC()
}

func (t tools) propose(ctx context.Context, _ *mcp.CallToolRequest, in ProposeInput) (*mcp.CallToolResult, ProposeOutput, error) {
	hasValue := len(in.Value) > 0
	switch {
	case hasValue && in.Expr != "":
		return nil, ProposeOutput{}, errors.New("give value or expr, not both")
	case !hasValue && in.Expr == "":
		return nil, ProposeOutput{}, fmt.Errorf("give value (the JSON value the field should take) or expr (a Terraform expression); to give the field up call %s", ToolYield)
	}
	cj := core.ClaimJSON{Field: in.Field, Value: in.Value, Expr: in.Expr, Intent: in.Intent, Expires: in.Expires}
	if m := in.Motivation; m != nil {
		cj.Motivation = &core.MotivationJSON{Kind: m.Kind, Ref: m.Ref, Severity: m.Severity}
	}
	return t.proposeOne(ctx, in.Repository, in.IdempotencyKey, cj)
}

func (t tools) yield(ctx context.Context, _ *mcp.CallToolRequest, in YieldInput) (*mcp.CallToolResult, ProposeOutput, error) {
	return t.proposeOne(ctx, in.Repository, in.IdempotencyKey, core.ClaimJSON{Field: in.Field, Yield: true, Expires: in.Expires})
}

// proposeOne makes the claim as app's proposalClaims does (the identity as actor, the time now)
// and proposes it.
func (t tools) proposeOne(ctx context.Context, repository, key string, cj core.ClaimJSON) (*mcp.CallToolResult, ProposeOutput, error) {
	if len(key) > 200 {
		return nil, ProposeOutput{}, errors.New("idempotency_key is longer than 200 characters")
	}
	if _, err := core.ParseField(cj.Field); err != nil {
		return nil, ProposeOutput{}, fieldError(err)
	}
	id := t.b.Identity()
	sid := id.ID
	cj.Actor = core.ActorJSON{Source: string(id.Source), ID: &sid}
	now := t.now()
	c, err := cj.Claim(core.Field{}, now)
	if err != nil {
		return nil, ProposeOutput{}, err
	}
	if !c.Expires.IsZero() && !c.Expires.After(now) {
		return nil, ProposeOutput{}, fmt.Errorf("expires %s is not in the future (now is %s)", c.Expires.Format(time.RFC3339), now.Format(time.RFC3339))
	}
	p, err := t.b.Propose(ctx, repository, key, []core.Claim{c})
	if err != nil {
		return nil, ProposeOutput{}, err
	}
	if len(p.Results) != 1 {
		return nil, ProposeOutput{}, fmt.Errorf("proposal %s: %d verdicts for one claim", p.ID, len(p.Results))
	}
	r := p.Results[0]
	out := ProposeOutput{Proposal: p.ID, Repository: p.Repository, Field: r.Claim.Field.String(), Accepted: r.Accepted,
		Decision: string(r.Verdict.Decision), Rule: r.Verdict.Rule, Until: until(r.Verdict), Explanation: arbiter.Explain(r.Verdict)}
	if r.Holder != nil {
		hj := r.Holder.JSON()
		out.Holder = &hj
	}
	return nil, out, nil
}

func (t tools) explain(ctx context.Context, _ *mcp.CallToolRequest, in ExplainInput) (*mcp.CallToolResult, ExplainOutput, error) {
	f, err := core.ParseField(in.Field)
	if err != nil {
		return nil, ExplainOutput{}, fieldError(err)
	}
	v, err := t.b.Explain(ctx, in.Repository, f)
	if err != nil {
		return nil, ExplainOutput{}, err
	}
	out := ExplainOutput{Field: f.String(), Decision: string(v.Decision), Rule: v.Rule, Until: until(v), Explanation: arbiter.Explain(v)}
	if v.Winner != nil {
		wj := v.Winner.JSON()
		out.Winner = &wj
	}
	return nil, out, nil
}

func (t tools) claims(ctx context.Context, _ *mcp.CallToolRequest, in ClaimsInput) (*mcp.CallToolResult, ClaimsOutput, error) {
	p, err := core.ParseFieldPattern(in.Pattern)
	if err != nil {
		return nil, ClaimsOutput{}, fmt.Errorf("pattern %q: %v (e.g. tf:**//aws_autoscaling_group.*#/* or k8s:apps/Deployment/prod/*#/spec/replicas)", in.Pattern, err)
	}
	limit := in.Limit
	switch {
	case limit == 0:
		limit = DefaultLimit
	case limit < 0 || limit > MaxLimit:
		return nil, ClaimsOutput{}, fmt.Errorf("limit %d: want 1 to %d", limit, MaxLimit)
	}
	holders, more, err := t.b.Claims(ctx, in.Repository, p, limit)
	if err != nil {
		return nil, ClaimsOutput{}, err
	}
	out := ClaimsOutput{Fields: []FieldClaims{}, More: more}
	for _, h := range holders {
		fc := FieldClaims{Field: h.Field.String(), Live: []core.ClaimJSON{}}
		if h.Git != nil {
			gj := h.Git.JSON()
			fc.Git = &gj
		}
		for _, c := range h.Live {
			fc.Live = append(fc.Live, c.JSON())
		}
		out.Fields = append(out.Fields, fc)
	}
	return nil, out, nil
}

func until(v core.Verdict) string {
	if v.Until.IsZero() {
		return ""
	}
	return v.Until.UTC().Format(time.RFC3339)
}

func fieldError(err error) error {
	return fmt.Errorf("%v (a field address looks like tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity or "+
		"k8s:apps/Deployment/prod/web#/spec/replicas; list_claims finds the addresses)", err)
}

// typeSchemas are the schemas of the types inference cannot read: json.RawMessage is any JSON
// value, not an array of bytes.
var typeSchemas = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {},
}

// claimDescs describe core.ClaimJSON's keys (docs/claims-format.md).
var claimDescs = map[string]string{
	"field":      "The field's address.",
	"actor":      "Who claims the field: the identity (source and id) as its source names it, and policy_actor, the policy's name for that actor.",
	"value":      "The value claimed, as plain JSON.",
	"expr":       "A Terraform expression claimed instead of a literal value.",
	"yield":      "true: the actor gives the field up.",
	"remove":     "true: the actor wants the field removed.",
	"intent":     "Why: the intent the policy ranks (availability, performance, cost, ...).",
	"motivation": "Why now: kind (incident, traffic, cve, ...), ref (e.g. an incident id) and severity.",
	"at":         "When the claim was made, RFC 3339.",
	"expires":    "When the claim ends, RFC 3339; absent: it stands until replaced.",
	"evidence":   "Where the claim comes from: a commit, a pull request, audit event ids, or the proposal that asked for it.",
}

// inputSchema infers T's schema and describes the keys several tools share.
func inputSchema[T any]() *jsonschema.Schema {
	s := mustFor[T]()
	for name, desc := range map[string]string{"repository": repositoryDesc, "field": fieldDesc} {
		if p := s.Properties[name]; p != nil && p.Description == "" {
			p.Description = desc
		}
	}
	if p := s.Properties["motivation"]; p != nil {
		if sev := p.Properties["severity"]; sev != nil {
			sev.Enum = []any{"low", "medium", "high", "critical"}
		}
	}
	if p := s.Properties["limit"]; p != nil {
		p.Minimum, p.Maximum = jsonschema.Ptr(1.0), jsonschema.Ptr(float64(MaxLimit))
		p.Default = json.RawMessage(fmt.Sprint(DefaultLimit))
	}
	if p := s.Properties["idempotency_key"]; p != nil {
		p.MaxLength = jsonschema.Ptr(200)
	}
	return s
}

// outputSchema infers T's schema, adds the descriptions given for its top-level keys, and
// describes the claims in it.
func outputSchema[T any](descs map[string]string) *jsonschema.Schema {
	s := mustFor[T]()
	for name, desc := range descs {
		if p := s.Properties[name]; p != nil {
			p.Description = desc
		}
	}
	describeClaims(s)
	return s
}

// describeClaims describes the keys of every claim schema within s.
func describeClaims(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if s.Properties["actor"] != nil && s.Properties["field"] != nil && s.Properties["evidence"] != nil {
		for name, desc := range claimDescs {
			if p := s.Properties[name]; p != nil && p.Description == "" {
				p.Description = desc
			}
		}
	}
	for _, p := range s.Properties {
		describeClaims(p)
	}
	describeClaims(s.Items)
}

func mustFor[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: typeSchemas})
	if err != nil {
		panic(err)
	}
	return s
}
