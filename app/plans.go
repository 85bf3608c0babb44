package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	tok, src, code := p.open(w, r, tfplan.MaxPlanSize)
	if code != 0 {
		return
	}
	// The query is checked before the body is read: a plan for a repository the token may not
	// act on is not read at all.
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
	// The plan is asked whether it is past the resource budget as it arrives: one that is is
	// refused as ParsePlan refuses it, its rest neither read nor waited for (readPlan). The scan
	// is CPU-bound, so it takes the lane like decoding.
	var scan tfplan.PrefixScan
	var laneErr error
	body, over, rerr := readPlan(src, r.ContentLength, tfplan.MaxPlanSize, func(prefix []byte) (over bool, err error) {
		laneErr = h.Lane.Do(r.Context(), func() { over = scan.Over(prefix) })
		return over, laneErr
	})
	if laneErr != nil {
		return // the client went away while the plan waited for the lane
	}
	if rerr != nil {
		bodyError(w, rerr, tfplan.MaxPlanSize)
		return
	}
	if over {
		// The rest of the body is left unread: the connection ends with the answer, so net/http
		// neither reads what is left nor waits for it.
		w.Header().Set("Connection", "close")
		refuse(tfplan.ErrTooManyResources)
		return
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

// readPlan reads a plan's body from src, declared bytes (or, if declared is negative, up to
// limit: src ends it past limit) into a buffer that grows as the bytes arrive, and asks over
// whether what it holds already proves the plan past the resource budget: at every doubling of
// what it read from 64 KiB, and before each growth. If over says so, it stops there (over true):
// the rest is neither read nor allocated. A read error or over's (the client went away) is
// returned as it is; a body shorter than declared is io.ErrUnexpectedEOF, as io.ReadFull says.
//
// Why: parley serve allocated a buffer of a plan's declared length and read it whole before the
// plan was judged, and a plan of 300,000 resources (33 MB, bench/attack's bigplan) is refused by
// its first 1.6 MB: zeroing that buffer alone was 0.40 s of serve's CPU over 15 s of the attack,
// and the socket reads and, for an address over its failure budget, the pacing of the rest came
// on top.
//
// A declared length is not read with io.ReadAll, whose doubling held about twice the body
// (Proposals.admit): the buffer doubles through sizes that are a quarter of the declared length
// divided by a power of two, then grows to the declared length exactly, so growing to it holds a
// quarter more for the copy and what the plan is judged from is the body's size; before that it
// holds at most four times what was read.
func readPlan(src io.Reader, declared, limit int64, over func(prefix []byte) (bool, error)) (body []byte, isOver bool, err error) {
	const first = 64 << 10
	size := declared
	if declared < 0 {
		size = limit + 1 // src ends the body past limit
	}
	buf := make([]byte, 0, growTo(0, size, declared >= 0, first))
	check, checked := int64(first), -1
	ask := func() (bool, error) {
		checked = len(buf)
		for check <= int64(len(buf)) {
			check *= 2
		}
		return over(buf)
	}
	for int64(len(buf)) < size {
		if len(buf) == cap(buf) {
			if checked != len(buf) {
				if o, err := ask(); o || err != nil {
					return nil, o, err
				}
			}
			grown := make([]byte, len(buf), growTo(len(buf), size, declared >= 0, first))
			copy(grown, buf)
			buf = grown
		}
		n, err := src.Read(buf[len(buf):min(int64(cap(buf)), max(check, int64(len(buf))+1))])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) >= check {
			if o, err := ask(); o || err != nil {
				return nil, o, err
			}
		}
		switch {
		case err == io.EOF && declared >= 0 && int64(len(buf)) < declared:
			return nil, false, io.ErrUnexpectedEOF
		case err == io.EOF:
			return buf, false, nil
		case err != nil:
			return nil, false, err
		}
	}
	return buf, false, nil
}

// growTo is the size readPlan's buffer grows to from have bytes, for a body of size bytes. With
// a declared size: the sizes are size, then a quarter of it halved again and again down to first
// (or size alone, if a quarter of it is less than first), and it is the smallest above have.
// Without one: twice have (first to begin), at most size.
func growTo(have int, size int64, declared bool, first int64) int {
	if !declared {
		return int(min(size, max(first, 2*int64(have))))
	}
	n := (size + 3) / 4
	if n <= int64(have) || n < first {
		return int(size)
	}
	for m := (n + 1) / 2; m > int64(have) && m >= first; m = (n + 1) / 2 {
		n = m
	}
	return int(n)
}
