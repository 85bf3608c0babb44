package driftstate

import (
	"encoding/json"
	"strings"
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
	s, err := verdictText(v)
	return []byte(s), err
}

// verdictText is encodeVerdict's bytes as the text the verdicts table stores.
func verdictText(v core.Verdict) (string, error) {
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
	return jsonText(out)
}

// encodeClaim is json.Marshal(c), the same bytes, without compacting what Claim.MarshalJSON
// returned.
func encodeClaim(c core.Claim) ([]byte, error) {
	s, err := claimText(c)
	return []byte(s), err
}

// claimText is encodeClaim's bytes as the text the claims table stores.
func claimText(c core.Claim) (string, error) { return jsonText(c.JSON()) }

// jsonText is json.Marshal(v) as a string, copied out of encoding/json's buffer once: the drift
// state binds its JSON as TEXT, and string(json.Marshal(v)) copied every verdict twice. An
// Encoder writes what Marshal returns (same options: HTML escaped) and then a newline.
func jsonText(v any) (string, error) {
	var b strings.Builder
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		return "", err
	}
	s := b.String()
	return s[:len(s)-1], nil
}
