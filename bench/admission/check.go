package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/parleyhq/parley/internal/busycluster"
)

// unjudgedWarning is the part of the warning serve gives a review it could not judge (allowed
// unjudged: failing open).
const unjudgedWarning = "could not judge"

// wantDecisions is what serve's parley_admission_reviews_total must count for the mix sent: every
// HPA scale allowed, every cost optimizer scale-down refused (denied, or warned in warn mode),
// every ConfigMap uncovered, and nothing else.
func wantDecisions(want map[busycluster.Write]int, mode string) map[string]float64 {
	refused := "denied"
	if mode == "warn" {
		refused = "warned"
	}
	out := map[string]float64{}
	for dec, n := range map[string]int{"allowed": want[busycluster.HPAScale], refused: want[busycluster.CostScaleDown], "uncovered": want[busycluster.ConfigMapEdit]} {
		if n != 0 {
			out[dec] = float64(n)
		}
	}
	return out
}

// wrongAnswer says how serve's answer to a write differs from the one the write must get ("" when
// it does not): the scale-down refused (not allowed in deny mode; allowed with a warning in warn
// mode), everything else allowed, and nothing answered unjudged.
func wrongAnswer(w busycluster.Write, mode string, got *admissionv1.AdmissionResponse) string {
	if slices.ContainsFunc(got.Warnings, func(s string) bool { return strings.Contains(s, unjudgedWarning) }) {
		return fmt.Sprintf("answered unjudged: %q", got.Warnings)
	}
	switch {
	case w == busycluster.CostScaleDown && mode == "deny" && got.Allowed:
		return "a cost optimizer scale-down allowed in deny mode"
	case w == busycluster.CostScaleDown && mode == "warn" && (!got.Allowed || len(got.Warnings) == 0):
		return fmt.Sprintf("a cost optimizer scale-down in warn mode answered allowed=%t with %d warnings", got.Allowed, len(got.Warnings))
	case w == busycluster.HPAScale && !got.Allowed:
		return "an HPA scale refused"
	case w == busycluster.ConfigMapEdit && !got.Allowed:
		return "a ConfigMap edit refused"
	}
	return ""
}

// problems lists what makes the run wrong: reviews answered unjudged (fail-open) or not at all
// (the API server would apply its failurePolicy), serve's decisions other than the mix's, and
// answers other than the ones their writes must get. None means every review was judged right.
func (r *result) problems() []string {
	var out []string
	if r.unjudged != 0 {
		out = append(out, fmt.Sprintf("%.0f reviews answered unjudged (fail open)", r.unjudged))
	}
	if r.parley.errors != 0 {
		out = append(out, fmt.Sprintf("%d reviews got no answer from serve (the first: %s)", r.parley.errors, r.parley.first))
	}
	if want := wantDecisions(r.want, r.o.mode); !maps.Equal(r.decisions, want) {
		out = append(out, fmt.Sprintf("serve's decisions %s, want the mix's %s", decisionList(r.decisions), decisionList(want)))
	}
	wrong, first := 0, ""
	for i, a := range r.answers {
		if a == nil {
			continue // counted among the errors
		}
		if why := wrongAnswer(busycluster.Mix(i+1), r.o.mode, a); why != "" {
			if wrong++; first == "" {
				first = fmt.Sprintf("review %d: %s", i+1, why)
			}
		}
	}
	if wrong != 0 {
		out = append(out, fmt.Sprintf("%d answers wrong (the first, %s)", wrong, first))
	}
	return out
}

// decisionList is decisions by name, sorted: "allowed 20, denied 12".
func decisionList(d map[string]float64) string {
	if len(d) == 0 {
		return "none"
	}
	var parts []string
	for _, dec := range slices.Sorted(maps.Keys(d)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", dec, d[dec]))
	}
	return strings.Join(parts, ", ")
}
