package driftstate

import (
	"encoding/json"
	"time"

	"github.com/parleyhq/parley/core"
)

// verdictJSON is core.Verdict with its claims in their JSON shape (core.ClaimJSON). encoding/json
// writes it byte for byte as it writes the core.Verdict, but without compacting (scanning again)
// what each claim's MarshalJSON returned, which was half of encoding a verdict: every accepted
// admission review stores one, with its winner and losers. TestVerdictJSONWritesAVerdictsBytes
// holds the two alike, and fails when core.Verdict gains a field this does not have.
type verdictJSON struct {
	Field       core.Field       `json:"field"`
	Decision    core.Decision    `json:"decision"`
	Winner      *core.ClaimJSON  `json:"winner,omitempty"`
	Losers      []core.ClaimJSON `json:"losers,omitempty"`
	Rule        string           `json:"rule"`
	Until       time.Time        `json:"until,omitzero"`
	Recheck     time.Time        `json:"recheck,omitzero"`
	Ask         []string         `json:"ask,omitempty"`
	Proposed    *core.ClaimJSON  `json:"proposed,omitempty"`
	Explanation []core.Step      `json:"explanation,omitempty"`
}

// encodeVerdict is json.Marshal(v), the same bytes, faster.
func encodeVerdict(v core.Verdict) ([]byte, error) {
	out := verdictJSON{Field: v.Field, Decision: v.Decision, Rule: v.Rule, Until: v.Until, Recheck: v.Recheck, Ask: v.Ask, Explanation: v.Explanation}
	if v.Winner != nil {
		w := v.Winner.JSON()
		out.Winner = &w
	}
	if v.Proposed != nil {
		p := v.Proposed.JSON()
		out.Proposed = &p
	}
	if len(v.Losers) > 0 {
		out.Losers = make([]core.ClaimJSON, len(v.Losers))
		for i, c := range v.Losers {
			out.Losers[i] = c.JSON()
		}
	}
	return json.Marshal(out)
}

// encodeClaim is json.Marshal(c), the same bytes, without compacting what Claim.MarshalJSON
// returned.
func encodeClaim(c core.Claim) ([]byte, error) { return json.Marshal(c.JSON()) }
