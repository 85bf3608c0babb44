package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/parleyhq/parley/app/mcptools"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/agentstore"
	"github.com/parleyhq/parley/reconcile"
)

// MCPPath is where parley serve speaks the Model Context Protocol (streamable HTTP).
const MCPPath = "/mcp"

// maxMCPBytes bounds one MCP request: a tool call, not a document.
const maxMCPBytes = 1 << 20

// MCP serves the agent tools (app/mcptools: propose_change, yield_field, explain_field,
// list_claims) at /mcp. It is stateless: every request carries the agent's bearer token, is
// checked and rate limited as proposals are, and is served by tools acting as that token's
// identity, so no session outlives its token or can be borrowed by another one.
type MCP struct {
	Proposals *Proposals
	Version   string

	once    sync.Once
	handler http.Handler
}

type mcpTokenKey struct{}

func (h *MCP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.once.Do(func() {
		h.handler = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
			tok, _ := r.Context().Value(mcpTokenKey{}).(agentstore.Token)
			return mcptools.NewServer(agentBackend{p: h.Proposals, tok: tok}, h.Version)
		}, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: h.Proposals.log()})
	})
	tok, code := h.Proposals.authenticate(w, r)
	if code != 0 {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxMCPBytes)
	if r.Method == http.MethodPost {
		// A JSON-RPC message naming a key twice ("method", "id", a tool's "name") is refused as
		// the rest of the intake refuses one: the SDK's encoding/json would keep the last silently.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeJSON(w, http.StatusRequestEntityTooLarge, mcpRequestError(fmt.Sprintf("the request: %v", err)))
			return
		}
		if err := core.UniqueKeys(body); errors.Is(err, core.ErrDuplicateKey) {
			writeJSON(w, http.StatusBadRequest, mcpRequestError(fmt.Sprintf("the request: %v: name each key once", err)))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	h.handler.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), mcpTokenKey{}, tok)))
}

// mcpRequestError is a JSON-RPC error answer to a request Parley refuses before reading it as one
// (so with no id: JSON-RPC's answer to a request whose id cannot be trusted).
func mcpRequestError(msg string) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32600, "message": msg}}
}

// agentBackend is what an MCP session may do, as its token's identity, through the drift loop's
// repositories: the same judgement and records as POST /v1/proposals.
type agentBackend struct {
	p   *Proposals
	tok agentstore.Token
}

func (b agentBackend) Identity() core.Identity { return b.tok.Identity }

func (b agentBackend) Propose(ctx context.Context, repository, key string, claims []core.Claim) (mcptools.Proposal, error) {
	if err := b.p.mayActOn(b.tok, repository); err != nil {
		return mcptools.Proposal{}, err
	}
	id := agentstore.ProposalID(b.tok.ID, key)
	req, _ := json.Marshal(claimsJSON(claims))
	// A key names one proposal: used again for other claims, the second would share the first's
	// id, and its claims would not be recorded though it might be answered "accepted".
	if prev, ok, err := b.p.Agents.Lookup(ctx, b.tok.ID, key); err != nil {
		return mcptools.Proposal{}, err
	} else if ok && prev.RequestSHA256 != agentstore.RequestDigest(req) {
		return mcptools.Proposal{}, fmt.Errorf("idempotency key %q was used for a different proposal (%s): use a new key for a new change", key, prev.ID)
	}
	repo, res, err := b.p.Drift.Propose(ctx, repository, b.p.MaxAge, id, claims)
	if err != nil {
		return mcptools.Proposal{}, mcpError(err)
	}
	accepted := 0
	for _, r := range res {
		if r.Accepted {
			accepted++
		}
	}
	// Logged like an API proposal, so a proposal made through MCP is on record too.
	resp, _ := json.Marshal(struct {
		Via     string               `json:"via"`
		Results []reconcile.Proposed `json:"results"`
	}{"mcp", res})
	if _, err := b.p.Agents.Record(ctx, agentstore.Proposal{ID: id, TokenID: b.tok.ID, IdempotencyKey: key, Repository: repo,
		RequestSHA256: agentstore.RequestDigest(req), Status: http.StatusOK, Response: resp, Accepted: accepted, Refused: len(res) - accepted,
		At: b.p.now()}); err != nil && !errors.Is(err, agentstore.ErrKeyReused) {
		b.p.log().Error("MCP proposal answered but not logged", "proposal", id, "error", err.Error())
	}
	return mcptools.Proposal{ID: id, Repository: repo, Results: res}, nil
}

func (b agentBackend) Explain(ctx context.Context, repository string, f core.Field) (core.Verdict, error) {
	if err := b.p.mayActOn(b.tok, repository); err != nil {
		return core.Verdict{}, err
	}
	_, v, err := b.p.Drift.Explain(ctx, repository, b.p.MaxAge, f)
	return v, mcpError(err)
}

func (b agentBackend) Claims(ctx context.Context, repository string, p core.FieldPattern, limit int) ([]reconcile.Holders, bool, error) {
	if err := b.p.mayActOn(b.tok, repository); err != nil {
		return nil, false, err
	}
	_, hs, more, err := b.p.Drift.Claims(ctx, repository, b.p.MaxAge, p, limit)
	return hs, more, mcpError(err)
}

// mcpError tells the tools which errors are the agent's to fix.
func mcpError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUnknownRepository):
		return fmt.Errorf("%w: %v", mcptools.ErrUnknownRepository, err)
	case errors.Is(err, reconcile.ErrNoPolicy):
		return fmt.Errorf("the repository has no policy: %w", err)
	}
	return err
}

func claimsJSON(cs []core.Claim) []core.ClaimJSON {
	out := make([]core.ClaimJSON, len(cs))
	for i, c := range cs {
		out[i] = c.JSON()
	}
	return out
}

// buildVersion is the module version the binary was built from, or "devel".
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
