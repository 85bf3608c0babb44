package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ClaimJSON is a claim as JSON: the one shape Parley reads and writes wherever a claim appears
// (claims files, event streams, verdicts, the drift state, pull request comments, the proposals
// API). docs/claims-format.md describes it and docs/schemas/claim.schema.json pins it.
//
// Keys are snake_case as in GitHub's API; absent things are omitted, never null. A literal value is
// plain JSON under "value" (JSON null is a value: the field is null); a Terraform expression that is
// not a literal goes under "expr" instead; a claim with neither yields the field ("yield": true) or
// wants it removed ("remove": true).
type ClaimJSON struct {
	Field      string          `json:"field"`
	Actor      ActorJSON       `json:"actor"`
	Value      json.RawMessage `json:"value,omitempty"` // any JSON value; omitted: absent
	Expr       string          `json:"expr,omitempty"`  // a Terraform expression instead of a value
	Yield      bool            `json:"yield,omitempty"`
	Remove     bool            `json:"remove,omitempty"` // the actor wants the field gone
	Intent     string          `json:"intent,omitempty"`
	Motivation *MotivationJSON `json:"motivation,omitempty"`
	At         string          `json:"at,omitempty"`      // RFC 3339
	Expires    string          `json:"expires,omitempty"` // RFC 3339, or (read only) a duration after at such as "4h"
	Evidence   *EvidenceJSON   `json:"evidence,omitempty"`
}

// ActorJSON is the actor's identity as its source names it. ID must be present but may be empty: a
// commit can have an empty author email, an audit event an empty user name. PolicyActor is the policy's name for the
// actor when Parley wrote the claim after judging it; it is informative only: the arbiter resolves the
// actor from source and id again, so a claim cannot name itself into a more trusted actor.
type ActorJSON struct {
	Source      string   `json:"source"`
	ID          *string  `json:"id"`
	Name        string   `json:"name,omitempty"`
	Groups      []string `json:"groups,omitempty"`
	PolicyActor string   `json:"policy_actor,omitempty"`
}

// MotivationJSON is a motivation.
type MotivationJSON struct {
	Kind     string `json:"kind"`
	Ref      string `json:"ref,omitempty"`
	Severity string `json:"severity,omitempty"`
}

// EvidenceJSON is where a claim came from.
type EvidenceJSON struct {
	Source   string   `json:"source,omitempty"`
	Commit   string   `json:"commit,omitempty"`
	PR       int      `json:"pr,omitempty"`
	EventIDs []string `json:"event_ids,omitempty"`
	Explicit bool     `json:"explicit,omitempty"`
	Proposal string   `json:"proposal,omitempty"`
}

// KnownSources lists the identity sources in a stable order.
func KnownSources() []IdentitySource {
	return []IdentitySource{SourceGitAuthor, SourceGitHubUser, SourceGitHubTeam, SourceKubeUser,
		SourceFieldManager, SourceAWSPrincipal}
}

// JSON returns the claim in its JSON shape. Times are written in UTC with the precision they have.
func (c Claim) JSON() ClaimJSON {
	cj := ClaimJSON{
		Field: c.Field.String(),
		Actor: ActorJSON{Source: string(c.Actor.Identity.Source), ID: &c.Actor.Identity.ID,
			Name: c.Actor.Identity.Name, Groups: c.Actor.Identity.Groups, PolicyActor: c.Actor.Name},
		Yield:  c.Yield,
		Intent: string(c.Intent),
	}
	if c.Field.IsZero() {
		cj.Field = ""
	}
	switch {
	case c.Value.IsExpr():
		cj.Expr = c.Value.Expr()
	case !c.Value.Absent():
		cj.Value = json.RawMessage(c.Value.JSON())
	case !c.Yield:
		cj.Remove = true
	}
	if !c.Motivation.IsZero() {
		cj.Motivation = &MotivationJSON{Kind: c.Motivation.Kind, Ref: c.Motivation.Ref, Severity: string(c.Motivation.Severity)}
	}
	if !c.At.IsZero() {
		cj.At = c.At.UTC().Format(time.RFC3339Nano)
	}
	if !c.Expires.IsZero() {
		cj.Expires = c.Expires.UTC().Format(time.RFC3339Nano)
	}
	if e := c.Evidence; e.Source != "" || e.Commit != "" || e.PR != 0 || len(e.EventIDs) > 0 || e.Explicit || e.Proposal != "" {
		cj.Evidence = &EvidenceJSON{Source: e.Source, Commit: e.Commit, PR: e.PR, EventIDs: e.EventIDs, Explicit: e.Explicit, Proposal: e.Proposal}
	}
	return cj
}

// Claim converts to a Claim, checking everything a person can get wrong. defaultAt is used when At
// is empty; defaultField when Field is. Errors name the key at fault.
func (cj ClaimJSON) Claim(defaultField Field, defaultAt time.Time) (Claim, error) {
	var c Claim
	if cj.Field == "" {
		if defaultField.IsZero() {
			return c, errors.New("claim has no field")
		}
		c.Field = defaultField
	} else {
		f, err := ParseField(cj.Field)
		if err != nil {
			return c, err
		}
		c.Field = f
	}
	src := IdentitySource(cj.Actor.Source)
	if !slices.Contains(KnownSources(), src) {
		return c, fmt.Errorf("actor source %q: want one of git-author, github-user, github-team, k8s-user, field-manager, aws-principal", cj.Actor.Source)
	}
	if cj.Actor.ID == nil {
		return c, errors.New("actor has no id")
	}
	c.Actor = Actor{Name: cj.Actor.PolicyActor,
		Identity: Identity{Source: src, ID: *cj.Actor.ID, Name: cj.Actor.Name, Groups: nilIfEmpty(cj.Actor.Groups)}}
	forms := 0
	for _, set := range []bool{len(cj.Value) > 0, cj.Expr != "", cj.Yield, cj.Remove} {
		if set {
			forms++
		}
	}
	switch {
	case forms == 0:
		return c, errors.New(`claim has no value (write "value", "expr", "yield": true or "remove": true)`)
	case forms > 1:
		return c, errors.New(`claim has more than one of "value", "expr", "yield" and "remove"`)
	case cj.Expr != "":
		c.Value = ExprValue(cj.Expr)
	case len(cj.Value) > 0:
		v, err := ParseJSONValue(cj.Value)
		if err != nil {
			return c, err
		}
		c.Value = v
	}
	c.Yield = cj.Yield
	c.Intent = Intent(cj.Intent)
	if cj.Motivation != nil {
		sev := Severity(cj.Motivation.Severity)
		if sev.Rank() < 0 {
			return c, fmt.Errorf("motivation severity %q: want low, medium, high or critical", cj.Motivation.Severity)
		}
		if cj.Motivation.Kind == "" {
			return c, errors.New("motivation has no kind")
		}
		c.Motivation = Motivation{Kind: cj.Motivation.Kind, Ref: cj.Motivation.Ref, Severity: sev}
	}
	c.At = defaultAt
	if cj.At != "" {
		t, err := time.Parse(time.RFC3339, cj.At)
		if err != nil {
			return c, fmt.Errorf("at %q is not an RFC 3339 time", cj.At)
		}
		c.At = t.UTC()
	}
	if cj.Expires != "" {
		if t, err := time.Parse(time.RFC3339, cj.Expires); err == nil {
			c.Expires = t.UTC()
		} else if d, err := time.ParseDuration(cj.Expires); err == nil && d > 0 {
			if c.At.IsZero() {
				return c, fmt.Errorf("expires %q is a duration, but the claim has no at to count from", cj.Expires)
			}
			c.Expires = c.At.Add(d)
		} else {
			return c, fmt.Errorf("expires %q: want an RFC 3339 time or a positive duration such as 4h", cj.Expires)
		}
	}
	if e := cj.Evidence; e != nil {
		if e.PR < 0 {
			return c, fmt.Errorf("evidence pr %d: want a pull request number", e.PR)
		}
		c.Evidence = Evidence{Source: e.Source, Commit: e.Commit, PR: e.PR, EventIDs: nilIfEmpty(e.EventIDs), Explicit: e.Explicit, Proposal: e.Proposal}
	}
	return c, nil
}

// nilIfEmpty makes an empty list absent, as it is written.
func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// MarshalJSON writes the claim's JSON shape (ClaimJSON).
func (c Claim) MarshalJSON() ([]byte, error) { return json.Marshal(c.JSON()) }

// UnmarshalJSON reads a claim in its JSON shape, strictly: unknown keys are errors. It also reads the
// Go-cased shape Parley wrote before parley.dev/verdicts/v2 ({"Field", "Actor": {"Name", "Identity"},
// "Value": {"json": ...}}), so pull request comments and drift state written by earlier versions
// still read.
func (c *Claim) UnmarshalJSON(b []byte) error {
	if err := UniqueKeys(b); errors.Is(err, ErrDuplicateKey) {
		return fmt.Errorf("claim: %w", err)
	}
	if isLegacyClaim(b) {
		return c.unmarshalLegacy(b)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var cj ClaimJSON
	if err := dec.Decode(&cj); err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	nc, err := cj.Claim(Field{}, time.Time{})
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	*c = nc
	return nil
}

// DecodeStoredClaim decodes a claim Parley itself encoded (Claim.MarshalJSON) into its own store.
// It skips two passes UnmarshalJSON makes for outside input, the duplicate-key scan and the sniff
// for the pre-v2 Go-cased shape: they were two of the three passes over every standing claim the
// drift state reads on each admission review. Anything not in the current shape (a store written
// by an earlier version) goes through UnmarshalJSON, so it reads exactly as before.
func DecodeStoredClaim(b []byte) (Claim, error) {
	if bytes.HasPrefix(b, []byte(`{"field":`)) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var cj ClaimJSON
		if err := dec.Decode(&cj); err == nil && !dec.More() {
			if c, err := cj.Claim(Field{}, time.Time{}); err == nil {
				return c, nil
			}
		}
	}
	var c Claim
	err := c.UnmarshalJSON(b)
	return c, err
}

// isLegacyClaim reports whether b is a claim object in the Go-cased shape of parley.dev/verdicts/v1.
func isLegacyClaim(b []byte) bool {
	var keys map[string]json.RawMessage
	if json.Unmarshal(b, &keys) != nil {
		return false
	}
	_, field := keys["Field"]
	_, actor := keys["Actor"]
	return field || actor
}

// legacyClaim is the Go-cased shape Parley wrote before v2: encoding/json's default for Claim, with
// values as {"json": ...} or {"expr": ...}.
type legacyClaim struct {
	Field Field
	Actor struct {
		Name     string
		Identity struct {
			Source IdentitySource
			ID     string
			Name   string
			Groups []string
		}
	}
	Value struct {
		JSON json.RawMessage `json:"json"`
		Expr *string         `json:"expr"`
	}
	Yield      bool
	Intent     Intent
	Motivation Motivation
	At         time.Time
	Expires    time.Time
	Evidence   Evidence
}

func (c *Claim) unmarshalLegacy(b []byte) error {
	var l legacyClaim
	if err := json.Unmarshal(b, &l); err != nil {
		return fmt.Errorf("claim (v1 shape): %w", err)
	}
	nc := Claim{Field: l.Field, Actor: Actor{Name: l.Actor.Name, Identity: Identity{Source: l.Actor.Identity.Source, ID: l.Actor.Identity.ID,
		Name: l.Actor.Identity.Name, Groups: l.Actor.Identity.Groups}},
		Yield: l.Yield, Intent: l.Intent, Motivation: l.Motivation, At: l.At, Expires: l.Expires, Evidence: l.Evidence}
	switch {
	case l.Value.Expr != nil:
		nc.Value = ExprValue(*l.Value.Expr)
	case len(l.Value.JSON) > 0:
		v, err := ParseJSONValue(l.Value.JSON)
		if err != nil {
			return fmt.Errorf("claim (v1 shape): %w", err)
		}
		nc.Value = v
	}
	// Held to the same rules as the v2 shape, so whatever reads in one shape writes in the other.
	checked, err := nc.JSON().Claim(Field{}, time.Time{})
	if err != nil {
		return fmt.Errorf("claim (v1 shape): %w", err)
	}
	*c = checked
	return nil
}
