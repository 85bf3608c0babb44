package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/tfplan"
	"github.com/parleyhq/parley/trailers"
	"github.com/parleyhq/parley/webhooks/guard"
)

// PlansPath is where a CI job or an apply wrapper asks about a Terraform plan before applying it.
const PlansPath = "/v1/plans"

// Plans serves POST /v1/plans: the body is a plan as `terraform show -json PLANFILE` prints it,
// judged as parley review --plan judges it, with the bearer token's identity as the plan's
// author (docs/plans.md). The query says where: repository (default: the default repository),
// module_dir (the repository directory of the plan's root module, default "."), and optionally
// intent and motivation ("incident:INC-4211"). The answer is the judged plan's document
// (docs/schemas/plan-review.schema.json): its conclusion is "failure" when the plan's own value
// is vetoed, "action_required" when a changed field is held or escalated. Nothing is recorded:
// a plan is a question, and its apply is judged from CloudTrail like any change.
type Plans struct {
	// Proposals gives the token check, rate limits, drift loop and branch age proposals use.
	Proposals *Proposals
	// Lane is where decoding and judging a plan take their CPU (WorkLane); nil: anywhere.
	Lane *WorkLane
}

func (h *Plans) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := h.Proposals
	fail := func(code int, format string, args ...any) {
		writeJSON(w, code, proposalError{Error: fmt.Sprintf(format, args...)})
	}
	tok, body, code := p.admit(w, r, tfplan.MaxPlanSize)
	if code != 0 {
		return
	}
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "repository", "module_dir", "intent", "motivation":
		default:
			fail(http.StatusBadRequest, "unknown query parameter %q (want repository, module_dir, intent, motivation)", k)
			return
		}
	}
	if err := p.mayActOn(tok, q.Get("repository")); err != nil {
		fail(http.StatusForbidden, "%v", err)
		return
	}
	moduleDir := q.Get("module_dir")
	if moduleDir == "" {
		moduleDir = "."
	}
	if clean := path.Clean(moduleDir); clean != moduleDir || path.IsAbs(moduleDir) || clean == ".." || strings.HasPrefix(clean, "../") {
		fail(http.StatusBadRequest, "module_dir %q: want a clean repository-relative directory", moduleDir)
		return
	}
	// A plan refused as unreadable or past its budgets counts against its address's failure
	// budget, as a wrong token does: past it, the refusal is held (its Retry-After, at most
	// guard.DefaultHold) and the address's next bodies are read paced (admit). A valid token
	// sending 33 MB plans of 300,000 resources back to back had each read and decoded up to the
	// 20,000th resource, a core of serve's two under bench/attack's bigplan.
	refuse := func(err error) {
		if wait, over := p.Failures.Failed(r, "plans"); over {
			p.Failures.Hold(r, wait)
			w.Header().Set("Retry-After", guard.RetryAfter(wait))
		}
		fail(http.StatusUnprocessableEntity, "plan: %v", err)
	}
	var res tfplan.Result
	var err error
	if lerr := h.Lane.Do(r.Context(), func() {
		var plan *tfjson.Plan
		if plan, err = tfplan.ParsePlan(body); err == nil {
			res, err = tfplan.Extract(plan, tfplan.Options{ModuleDir: moduleDir})
		}
	}); lerr != nil {
		return // the client went away while the plan waited for the lane
	}
	if err != nil {
		refuse(err)
		return
	}
	now := p.now()
	opts := tfplan.ClaimOptions{Author: tok.Identity, Intent: core.Intent(strings.ToLower(strings.TrimSpace(q.Get("intent")))), At: now}
	if m := q.Get("motivation"); m != "" {
		if opts.Motivation, err = trailers.ParseMotivation(m); err != nil {
			fail(http.StatusBadRequest, "motivation %q: %v", m, err)
			return
		}
	}
	var doc tfplan.Document
	repo, err := p.Drift.WithBranch(r.Context(), q.Get("repository"), p.MaxAge, func(snap reconcile.Snapshot) error {
		var js []tfplan.Judgement
		var err error
		if lerr := h.Lane.Do(r.Context(), func() { js, err = tfplan.Judge(r.Context(), snap.Policy, res, snap.Git, opts, now) }); lerr != nil {
			return lerr
		}
		if err != nil {
			return err
		}
		doc = tfplan.NewDocument(res, js, tok.Identity, moduleDir, now)
		return nil
	})
	switch {
	case errors.Is(err, ErrUnknownRepository):
		fail(http.StatusNotFound, "%v", err)
		return
	case errors.Is(err, reconcile.ErrNoPolicy):
		fail(http.StatusConflict, "%v", err)
		return
	case err != nil:
		p.log().Error("plan not judged", "token", tok.Name, "error", err.Error())
		w.Header().Set("Retry-After", "5")
		fail(http.StatusServiceUnavailable, "the plan could not be judged: %v; send it again", err)
		return
	}
	var out bytes.Buffer
	if err := json.NewEncoder(&out).Encode(doc); err != nil {
		fail(http.StatusInternalServerError, "encode the answer: %v", err)
		return
	}
	p.log().Info("plan judged", "token", tok.Name, "repository", repo, "changes", len(doc.Changes), "conclusion", doc.Conclusion)
	writeRaw(w, http.StatusOK, bytes.TrimRight(out.Bytes(), "\n"))
}
