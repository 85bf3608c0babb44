package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/app"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/agentstore"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/driftstate"
	"github.com/parleyhq/parley/reconcile/gitops"
	"github.com/parleyhq/parley/trailers"
)

// maxAnswerBytes bounds the answer read from the server: a few verdicts, not a dump.
const maxAnswerBytes = 8 << 20

func newProposeCmd() *cobra.Command {
	var render *renderFlags // set once the flags are registered, below
	var (
		claims                      proposeClaims
		intent, motivation, expires string
		repository, idemKey         string
		server, tokenFile           string
		timeout                     time.Duration
		dir, as, statePath, at      string
		asJSON                      bool
	)
	cmd := &cobra.Command{
		Use:   "propose --field F (--value JSON | --expr E | --yield | --remove) [--field ...] (--server URL | --repo DIR --as SOURCE:ID)",
		Short: "Ask before changing a field: is the change accepted, or who holds the field and why",
		Long: `Propose asks Parley before a change is made, as an agent does through the proposals API: each
proposed claim (a field and the value wanted) is judged against the field's standing claims and
Git's under the repository's policy, and the answer says, per field, ACCEPTED (the change may be
made; the claim stands until it expires) or REFUSED, with who holds the field instead, why, and
until when.

Claims: --field starts a claim, and the one of --value (a JSON value: 12, "\"m5.large\"", null),
--expr (a Terraform expression), --yield or --remove that follows it says what it wants. Give
several --field flags, each followed by its own value flag, to propose several fields at once
(one claim per field). --intent, --motivation and --expires apply to every claim of the
invocation. --motivation is KIND[:REF] (incident:INC-4211) or the Motivation trailer's form
("incident INC-4211 severity=high"); --expires is a duration such as 4h or an RFC 3339 time.

Online, --server URL posts the proposal to parley serve's POST /v1/proposals with the bearer token
read from --token-file or the PARLEY_TOKEN environment variable (there is no --token flag: a
command line is visible to every user of the machine); parley tokens create makes one. The server
judges as the token's identity, against --repository (default: its gitops_repository).

Offline, --repo DIR judges against a local clone of the GitOps repository (its default branch's
ledger and .parley/policy.hcl) as the identity --as SOURCE:ID, at --at (default now). Accepted
claims are recorded in the drift state --state names (as parley ingest --state keeps it), or in
memory and forgotten. The answer has the same shape as the server's; the proposal id is random, or
derived from --idempotency-key so that a proposal repeated against the same --state records its
claims once. Offline, the repository's charts are rendered to find the values Git gives their
objects; ` + renderHelp + `

Output: per claim ACCEPTED or REFUSED, the decision and rule, until when, and for a refusal the
holder (actor, value, intent, motivation, expiry) and the explanation. --json prints the answer
(docs/schemas/proposal-response.schema.json): online, the server's body exactly as received.

Exit status: 0 when every claim is accepted, 1 when any is refused, 2 for bad input or an error
answer from the server (its message and HTTP status are printed), 3 when the server cannot be
reached.`,
		Example: `  export PARLEY_TOKEN=$(cat kafka-agent.token)
  parley propose --server https://parley.example.com --repository acme/infra \
    --field 'tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity' --value 12 \
    --intent performance --motivation incident:INC-7 --expires 4h
  parley propose --repo ./infra --as aws-principal:arn:aws:iam::123456789012:role/kafka-scaling-agent \
    --field 'tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity' --value 24 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			online := server != ""
			switch {
			case online && dir != "":
				return usageErr(errors.New("give --server URL (ask parley serve) or --repo DIR (judge offline), not both"))
			case !online && dir == "":
				return usageErr(errors.New("give --server URL (ask parley serve) or --repo DIR --as SOURCE:ID (judge offline)"))
			case online && (as != "" || statePath != "" || at != ""):
				return usageErr(errors.New("--as, --state and --at judge offline, with --repo; online the server judges as the token's identity, now"))
			case !online && tokenFile != "":
				return usageErr(errors.New("--token-file goes with --server"))
			}
			if repository != "" && !repositoryName.MatchString(repository) {
				return usageErr(fmt.Errorf("--repository %q: want owner/name", repository))
			}
			if len(idemKey) > 200 {
				return usageErr(errors.New("--idempotency-key is longer than 200 characters"))
			}
			now := time.Now().UTC()
			if at != "" {
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return usageErr(fmt.Errorf("--at %q: want an RFC 3339 time", at))
				}
				now = t.UTC()
			}
			reqClaims, err := claims.finish(intent, motivation, expires, now)
			if err != nil {
				return usageErr(err)
			}
			if online {
				token, err := proposeToken(tokenFile)
				if err != nil {
					return usageErr(err)
				}
				return proposeOnline(cmd, server, token, timeout, app.ProposalRequest{Repository: repository, IdempotencyKey: idemKey, Claims: reqClaims}, asJSON)
			}
			if as == "" {
				return usageErr(errors.New("--as SOURCE:ID is required with --repo: the identity to judge the claims as (the identity the agent's token maps to)"))
			}
			id, err := agentstore.ParseIdentity(as)
			if err != nil {
				return usageErr(fmt.Errorf("--as: %w", err))
			}
			helm, closeWorkers, err := render.renderer()
			if err != nil {
				return err
			}
			defer closeWorkers()
			resp, err := proposeOffline(cmd, dir, statePath, repository, idemKey, id, reqClaims, now, helm)
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), resp); err != nil {
					return err
				}
			} else {
				printProposal(cmd.OutOrStdout(), resp)
			}
			return proposalExit(resp)
		},
	}
	f := cmd.Flags()
	f.Var(&fieldFlag{&claims}, "field", "a field to propose a change to, such as 'tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity' (repeatable; each followed by its value flag)")
	f.Var(&formFlag{&claims, "value"}, "value", `the value the preceding --field should take, as JSON: 12, '"m5.large"', '{"cpu": "2"}', null`)
	f.Var(&formFlag{&claims, "expr"}, "expr", "instead of --value: a Terraform expression that is not a literal, such as var.capacity")
	f.Var(&formFlag{&claims, "yield"}, "yield", "instead of --value: give the preceding --field up")
	f.Var(&formFlag{&claims, "remove"}, "remove", "instead of --value: have the preceding --field removed")
	f.Lookup("yield").NoOptDefVal = "true"
	f.Lookup("remove").NoOptDefVal = "true"
	f.StringVar(&intent, "intent", "", "what the changes are for: availability, cost, security, performance, ... (every claim)")
	f.StringVar(&motivation, "motivation", "", `why now: KIND[:REF] such as incident:INC-4211, or "incident INC-4211 severity=high" (every claim)`)
	f.StringVar(&expires, "expires", "", "when the claims end: a duration such as 4h, or an RFC 3339 time (every claim; default: they stand until replaced)")
	f.StringVar(&repository, "repository", "", "owner/name of the repository to judge against (online default: the server's gitops_repository; offline: only names it in the answer)")
	f.StringVar(&idemKey, "idempotency-key", "", "a key that makes a retry get the first answer instead of being judged again")
	f.BoolVar(&asJSON, "json", false, "print the answer as JSON (docs/schemas/proposal-response.schema.json; online the server's body as received)")
	f.StringVar(&server, "server", "", "online: parley serve's base URL; the proposal is posted to URL/v1/proposals")
	f.StringVar(&tokenFile, "token-file", "", "online: a file holding the bearer token (default: the PARLEY_TOKEN environment variable)")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "online: how long to wait for the answer")
	f.StringVar(&dir, "repo", "", "offline: the GitOps repository to judge against (its default branch's ledger and policy)")
	render = addRenderFlags(cmd)
	f.StringVar(&as, "as", "", "offline: the identity to judge the claims as, SOURCE:ID (e.g. aws-principal:arn:aws:iam::123456789012:role/kafka-agent)")
	f.StringVar(&statePath, "state", "", "offline: drift state file whose standing claims are weighed and where accepted claims are recorded (default: in memory)")
	f.StringVar(&at, "at", "", "offline: judge at this RFC 3339 time (default: now)")
	return cmd
}

var repositoryName = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)

// proposedClaim is one claim of a proposal as the request carries it: the claim shape without
// actor, at and evidence (docs/schemas/proposal-request.schema.json).
type proposedClaim struct {
	Field      string               `json:"field"`
	Value      json.RawMessage      `json:"value,omitempty"`
	Expr       string               `json:"expr,omitempty"`
	Yield      bool                 `json:"yield,omitempty"`
	Remove     bool                 `json:"remove,omitempty"`
	Intent     string               `json:"intent,omitempty"`
	Motivation *core.MotivationJSON `json:"motivation,omitempty"`
	Expires    string               `json:"expires,omitempty"`

	form string // the flag that gave its value: value, expr, yield or remove
}

// proposeClaims collects the claims in command-line order: --field starts one, and the value
// flag after it completes it. pflag calls Set in the order the flags are given, which pairs them.
type proposeClaims struct {
	list []*proposedClaim
}

type fieldFlag struct{ c *proposeClaims }

func (f *fieldFlag) String() string { return "" }
func (f *fieldFlag) Type() string   { return "field" }
func (f *fieldFlag) Set(s string) error {
	if _, err := core.ParseField(s); err != nil {
		return err
	}
	f.c.list = append(f.c.list, &proposedClaim{Field: s})
	return nil
}

type formFlag struct {
	c    *proposeClaims
	form string
}

func (f *formFlag) String() string { return "" }
func (f *formFlag) Type() string {
	switch f.form {
	case "yield", "remove":
		return "bool"
	case "value":
		return "json"
	}
	return "string"
}

func (f *formFlag) Set(s string) error {
	if len(f.c.list) == 0 {
		return fmt.Errorf("--%s must follow the --field it is for", f.form)
	}
	last := f.c.list[len(f.c.list)-1]
	if last.form != "" {
		return fmt.Errorf("--field %s already has --%s; give another --field first (one value flag per field)", last.Field, last.form)
	}
	switch f.form {
	case "value":
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(s)); err != nil {
			return fmt.Errorf("not a JSON value (%v); a string needs JSON quotes: --value '\"%s\"'", err, s)
		}
		last.Value = buf.Bytes()
	case "expr":
		if strings.TrimSpace(s) == "" {
			return errors.New("an empty expression")
		}
		last.Expr = s
	case "yield", "remove":
		if s != "true" {
			return fmt.Errorf("--%s takes no value", f.form)
		}
		last.Yield, last.Remove = f.form == "yield", f.form == "remove"
	}
	last.form = f.form
	return nil
}

// finish applies the flags every claim shares, checks each claim as the server would (with a
// stand-in actor) and returns the request's claims.
func (c *proposeClaims) finish(intent, motivation, expires string, now time.Time) ([]json.RawMessage, error) {
	if len(c.list) == 0 {
		return nil, errors.New("nothing proposed: give --field F and one of --value, --expr, --yield or --remove")
	}
	var mot *core.MotivationJSON
	if motivation != "" {
		m, err := parseProposeMotivation(motivation)
		if err != nil {
			return nil, err
		}
		mot = &core.MotivationJSON{Kind: m.Kind, Ref: m.Ref, Severity: string(m.Severity)}
	}
	intent = strings.ToLower(strings.TrimSpace(intent))
	if len(c.list) > 100 {
		return nil, fmt.Errorf("%d claims: at most 100 in one proposal", len(c.list))
	}
	seen := map[core.Field]bool{}
	out := make([]json.RawMessage, 0, len(c.list))
	for _, pc := range c.list {
		if pc.form == "" {
			return nil, fmt.Errorf("--field %s has no --value, --expr, --yield or --remove after it", pc.Field)
		}
		pc.Intent, pc.Motivation, pc.Expires = intent, mot, expires
		stand := "proposer"
		cj := core.ClaimJSON{Field: pc.Field, Actor: core.ActorJSON{Source: string(core.SourceGitAuthor), ID: &stand},
			Value: pc.Value, Expr: pc.Expr, Yield: pc.Yield, Remove: pc.Remove, Intent: pc.Intent, Motivation: pc.Motivation, Expires: pc.Expires}
		cl, err := cj.Claim(core.Field{}, now)
		if err != nil {
			if strings.HasPrefix(err.Error(), "expires ") {
				return nil, fmt.Errorf("--%w", err)
			}
			return nil, fmt.Errorf("--field %s: %w", pc.Field, err)
		}
		if !cl.Expires.IsZero() && !cl.Expires.After(now) {
			return nil, fmt.Errorf("--expires %s is not in the future", expires)
		}
		if seen[cl.Field] {
			return nil, fmt.Errorf("--field %s is given twice: one claim per field", pc.Field)
		}
		seen[cl.Field] = true
		b, err := json.Marshal(pc)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// parseProposeMotivation reads KIND[:REF] or the Motivation trailer's "KIND [REF] [severity=S]".
func parseProposeMotivation(s string) (core.Motivation, error) {
	words := strings.Fields(s)
	if len(words) > 0 {
		if kind, ref, ok := strings.Cut(words[0], ":"); ok && kind != "" {
			words = append([]string{kind, ref}, words[1:]...)
		}
	}
	m, err := trailers.ParseMotivation(strings.Join(words, " "))
	if err != nil {
		return m, fmt.Errorf("--motivation %q: %w", s, err)
	}
	return m, nil
}

// proposeToken reads the bearer token: --token-file, else PARLEY_TOKEN.
func proposeToken(file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("--token-file %s is empty", file)
		}
		return tok, nil
	}
	tok := strings.TrimSpace(os.Getenv("PARLEY_TOKEN"))
	if tok == "" {
		return "", errors.New("no token: set PARLEY_TOKEN or give --token-file PATH (parley tokens create makes one)")
	}
	return tok, nil
}

// proposeOnline posts the proposal to the server and prints its answer.
func proposeOnline(cmd *cobra.Command, server, token string, timeout time.Duration, req app.ProposalRequest, asJSON bool) error {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErr(fmt.Errorf("--server %q: want an http or https URL such as https://parley.example.com", server))
	}
	endpoint := strings.TrimRight(server, "/") + app.ProposalsPath
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return usageErr(fmt.Errorf("--server: %w", err))
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("Authorization", "Bearer "+token)
	hreq.Header.Set("User-Agent", "parley-cli")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("POST %s: no answer within %s (--timeout)", endpoint, timeout)
		}
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // without the method and URL again
		}
		return fmt.Errorf("POST %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("POST %s: read the answer: %w", endpoint, err)
	}
	status := fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(answer))
		if json.Unmarshal(answer, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if msg == "" {
			msg = "(no message)"
		}
		if len(msg) > 2000 {
			msg = msg[:2000] + "..."
		}
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			msg += fmt.Sprintf(" (retry after %ss)", ra)
		}
		return usageErr(fmt.Errorf("the server answered %s: %s", status, msg))
	}
	var pr app.ProposalResponse
	if err := json.Unmarshal(answer, &pr); err != nil || pr.Proposal == "" {
		return usageErr(fmt.Errorf("the server answered %s with a body that is not a proposal's answer (is --server parley serve?): %.200q", status, answer))
	}
	if resp.Header.Get("Idempotent-Replayed") == "true" {
		fmt.Fprintf(cmd.ErrOrStderr(), "parley: the first answer to idempotency key %q, given again: nothing was judged anew\n", req.IdempotencyKey)
	}
	if asJSON {
		if _, err := cmd.OutOrStdout().Write(answer); err != nil {
			return err
		}
	} else {
		printProposal(cmd.OutOrStdout(), pr)
	}
	return proposalExit(pr)
}

// proposeOffline judges the claims against a local repository as the server would, and answers
// in the server's shape.
func proposeOffline(cmd *cobra.Command, dir, statePath, repository, key string, id core.Identity, reqClaims []json.RawMessage, now time.Time, helm gitops.HelmRenderer) (app.ProposalResponse, error) {
	ctx := cmd.Context()
	claims := make([]core.Claim, 0, len(reqClaims))
	for _, raw := range reqClaims {
		var cj core.ClaimJSON
		if err := json.Unmarshal(raw, &cj); err != nil {
			return app.ProposalResponse{}, err
		}
		sid := id.ID
		cj.Actor = core.ActorJSON{Source: string(id.Source), ID: &sid}
		c, err := cj.Claim(core.Field{}, now)
		if err != nil {
			return app.ProposalResponse{}, usageErr(err)
		}
		claims = append(claims, c)
	}
	repo, err := openRepo(cmd, dir)
	if err != nil {
		return app.ProposalResponse{}, err
	}
	defer repo.Close()
	if repository == "" {
		repository = localRepositoryName(dir)
	}
	if statePath == "" {
		statePath = ":memory:"
	}
	st, err := driftstate.Open(ctx, statePath)
	if err != nil {
		return app.ProposalResponse{}, err
	}
	defer st.Close()
	snap, err := reconcile.LoadSnapshot(ctx, dir, repo.branch, policy.DefaultFile, repo.Ledger, nil)
	if errors.Is(err, reconcile.ErrNoPolicy) {
		return app.ProposalResponse{}, usageErr(fmt.Errorf("--repo %s: %w on %s: nothing can be judged without one (parley init writes one)", dir, err, repo.branch))
	}
	if err != nil {
		return app.ProposalResponse{}, err
	}
	snap.Helm = helm // before the snapshot's managers are discovered, which is when charts render
	rec := &reconcile.Reconciler{State: st, Now: func() time.Time { return now }}
	pid := agentstore.ProposalID("", "")
	if key != "" {
		pid = agentstore.ProposalID(id.String(), key)
	}
	judged, err := rec.Propose(ctx, snap, pid, claims)
	if err != nil {
		return app.ProposalResponse{}, err
	}
	return app.NewProposalResponse(pid, repository, id, judged), nil
}

// localRepositoryName names a local repository owner/name: from its origin's URL when that ends in
// owner/name, else local/<directory name>.
func localRepositoryName(dir string) string {
	if out, err := explainGit(dir, "remote", "get-url", "origin"); err == nil {
		u := strings.TrimSuffix(strings.TrimSpace(string(out)), ".git")
		u = strings.ReplaceAll(u, ":", "/")
		parts := strings.Split(strings.TrimRight(u, "/"), "/")
		if len(parts) >= 2 {
			if name := parts[len(parts)-2] + "/" + parts[len(parts)-1]; repositoryName.MatchString(name) {
				return name
			}
		}
	}
	base := "repository"
	if abs, err := filepath.Abs(dir); err == nil {
		base = filepath.Base(abs)
	}
	base = regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(base, "-")
	if base == "" || base == "." || base == "/" || base == "-" {
		base = "repository"
	}
	return "local/" + base
}

// printProposal prints an answer for people: per claim, ACCEPTED or REFUSED, the decision, rule
// and until when, and for a refusal who holds the field and the explanation.
func printProposal(w io.Writer, r app.ProposalResponse) {
	who := r.Actor.Source
	if r.Actor.ID != nil {
		who += ":" + *r.Actor.ID
	}
	if r.Actor.PolicyActor != "" {
		who = r.Actor.PolicyActor + " <" + who + ">"
	}
	fmt.Fprintf(w, "proposal %s in %s by %s: %d accepted, %d refused\n", r.Proposal, r.Repository, who, r.Accepted, r.Refused)
	for _, v := range r.Verdicts {
		verdict := "REFUSED"
		if v.Accepted {
			verdict = "ACCEPTED"
		}
		fmt.Fprintf(w, "\n%s  %s\n", verdict, v.Field)
		fmt.Fprintf(w, "  decision: %s\n", v.Decision)
		fmt.Fprintf(w, "  rule:     %s\n", v.Rule)
		if v.Until != "" {
			fmt.Fprintf(w, "  until:    %s\n", v.Until)
		}
		if v.Accepted {
			continue
		}
		if v.Holder != nil {
			fmt.Fprintf(w, "  holder:   %s\n", holderLine(*v.Holder))
		}
		// The explanation restates the field, decision and rule; its reasons follow "why:".
		expl := v.Explanation
		if i := strings.Index(expl, "\n  why:\n"); i >= 0 {
			expl = expl[i+1:]
		} else {
			expl = "  " + strings.ReplaceAll(strings.TrimRight(expl, "\n"), "\n", "\n  ") + "\n"
		}
		fmt.Fprint(w, expl)
	}
}

// holderLine is who holds a field: the actor, the value wanted, intent, motivation and expiry.
func holderLine(h core.ClaimJSON) string {
	who := h.Actor.Source
	if h.Actor.ID != nil {
		who += ":" + *h.Actor.ID
	}
	if h.Actor.PolicyActor != "" {
		who = h.Actor.PolicyActor + " <" + who + ">"
	}
	var want string
	switch {
	case h.Yield:
		want = "yields"
	case h.Remove:
		want = "wants it removed"
	case h.Expr != "":
		want = "wants ${" + h.Expr + "}"
	default:
		want = "wants " + string(h.Value)
	}
	s := who + " " + want + ", intent " + orNoneText(h.Intent)
	if m := h.Motivation; m != nil {
		mot := m.Kind
		if m.Ref != "" {
			mot += " " + m.Ref
		}
		if m.Severity != "" {
			mot += " severity=" + m.Severity
		}
		s += ", motivation " + mot
	} else {
		s += ", motivation none"
	}
	if h.Expires != "" {
		s += ", until " + h.Expires
	} else {
		s += ", no expiry"
	}
	return s
}

// proposalExit is 0 when every claim was accepted, 1 (findings) when any was refused.
func proposalExit(r app.ProposalResponse) error {
	if r.Refused > 0 {
		return findingsErr(fmt.Errorf("%d of %d proposed claim(s) refused", r.Refused, len(r.Verdicts)))
	}
	return nil
}
