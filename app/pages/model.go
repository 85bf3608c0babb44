// Package pages renders Parley's pages for people: a field's verdict with every rule's outcome and
// a timeline picture of its claims, a pull request's verdicts, and a repository's index with the
// gates Parley wrote. The pages are server-rendered HTML with the pictures as inline SVG drawn from
// the data: no script, nothing fetched from elsewhere when viewed, so the same bytes serve from
// `parley serve` behind sign-in and as static files written by `parley report`.
//
// The package renders only: it is given the data and the links, and knows nothing of GitHub, HTTP
// or Git.
package pages

import (
	"time"

	"github.com/parleyhq/parley/core"
)

// Links are the hrefs pages point to; each may be nil or empty, and the page then shows the
// thing without a link.
type Links struct {
	Index string                  // the repository's index page
	Field func(core.Field) string // a field's page
}

// Field is what a field's page shows.
type Field struct {
	Repository string // owner/name, or the directory of a local repository
	Field      core.Field
	At         time.Time // the time the verdict is for; the timeline ends here (or at the last thing on it)
	Verdict    core.Verdict
	// Git is the history of Git's value of the field, oldest first: each claim is the commit that
	// set the value (its author, intent and motivation), in force until the next.
	Git []core.Claim
	// Live are the claims made outside Git (drift events, ChatOps, agents' proposals), oldest
	// first, each in force from At until Expires (or the verdict's time when it does not expire).
	Live []core.Claim
	// Windows are the spans of time that constrained the field: freezes, holds, gates in force.
	Windows []Window
	// Drift are the drift verdicts on the field, oldest first (serve only).
	Drift []DriftVerdict
}

// WindowKind is what a window on the timeline is.
type WindowKind string

const (
	WindowFreeze WindowKind = "freeze" // a policy freeze covering the field
	WindowHold   WindowKind = "hold"   // a hold (ChatOps or the arbiter's) on the field
	WindowGate   WindowKind = "gate"   // a gate Parley wrote, pausing the GitOps tool on the field
)

// Window is a span of time on the timeline. A zero Until is open-ended.
type Window struct {
	Kind        WindowKind
	Label       string // e.g. the freeze's name, "held by @alice", the gate's rule
	From, Until time.Time
}

// DriftVerdict is one judgement of drift on the field, with what it was judged on.
type DriftVerdict struct {
	At       time.Time
	Verdict  core.Verdict
	Evidence string // e.g. "k8s audit event 7c1e0a00-... by system:serviceaccount:kube-system:hpa"
}

// PullRequest is what a pull request's page shows.
type PullRequest struct {
	Repository string
	Number     int
	Title      string
	Head       string    // the head commit judged
	At         time.Time // when it was judged
	Verdicts   []core.Verdict
}

// Index is what a repository's index page shows.
type Index struct {
	Repository string
	At         time.Time
	Fields     []FieldSummary
	// Total is how many fields have claims; more than len(Fields) when the index shows the first
	// ones only.
	Total int
	Gates []Gate
}

// FieldSummary is one row of the index: a field and its verdict.
type FieldSummary struct {
	Field   core.Field
	Verdict core.Verdict
	Claims  int // claims on its timeline (Git's and live)
}

// Gate is a gate Parley wrote in the repository.
type Gate struct {
	Field core.Field
	File  string    // the file holding it, e.g. clusters/prod/apps.yaml
	Rule  string    // the rule whose verdict wrote it
	Until time.Time // zero: until resumed
}
