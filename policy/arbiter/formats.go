package arbiter

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
)

// ClaimsFile is the input of 'parley explain --claims': claims on one or more fields, the claim Git
// holds on each, Git's values of other fields (for bounds), and optionally history.
type ClaimsFile struct {
	At        string                     `json:"at,omitempty"`
	Git       []core.ClaimJSON           `json:"git,omitempty"`
	Live      []core.ClaimJSON           `json:"live,omitempty"`
	History   []core.ClaimJSON           `json:"history,omitempty"`
	GitValues map[string]json.RawMessage `json:"git_values,omitempty"`
}

// ClaimSet is a decoded claims file.
type ClaimSet struct {
	At      time.Time // zero when the file does not say
	Git     map[core.Field]core.Claim
	Live    []core.Claim
	History []core.Claim
	Values  GitValues // Git's values: git_values plus the values of the claims Git holds
}

// ReadClaims decodes a claims file, naming the entry at fault in errors.
func ReadClaims(r io.Reader) (*ClaimSet, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("claims file: %w", err)
	}
	if err := core.UniqueKeys(data); errors.Is(err, core.ErrDuplicateKey) {
		return nil, fmt.Errorf("claims file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var cf ClaimsFile
	if err := dec.Decode(&cf); err != nil {
		return nil, fmt.Errorf("claims file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("claims file: trailing data after the JSON object")
	}
	cs := &ClaimSet{Git: map[core.Field]core.Claim{}, Values: GitValues{}}
	if cf.At != "" {
		t, err := time.Parse(time.RFC3339, cf.At)
		if err != nil {
			return nil, fmt.Errorf("claims file: at %q is not an RFC 3339 time", cf.At)
		}
		cs.At = t.UTC()
	}
	for i, cj := range cf.Git {
		c, err := cj.Claim(core.Field{}, time.Time{})
		if err != nil {
			return nil, fmt.Errorf("claims file: git[%d]: %w", i, err)
		}
		if _, dup := cs.Git[c.Field]; dup {
			return nil, fmt.Errorf("claims file: git[%d]: Git already holds a claim on %s", i, c.Field)
		}
		cs.Git[c.Field] = c
		cs.Values[c.Field] = c.Value
	}
	for i, cj := range cf.Live {
		c, err := cj.Claim(core.Field{}, time.Time{})
		if err != nil {
			return nil, fmt.Errorf("claims file: live[%d]: %w", i, err)
		}
		cs.Live = append(cs.Live, c)
	}
	for i, cj := range cf.History {
		c, err := cj.Claim(core.Field{}, time.Time{})
		if err != nil {
			return nil, fmt.Errorf("claims file: history[%d]: %w", i, err)
		}
		cs.History = append(cs.History, c)
	}
	keys := make([]string, 0, len(cf.GitValues))
	for k := range cf.GitValues {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		f, err := core.ParseField(k)
		if err != nil {
			return nil, fmt.Errorf("claims file: git_values: %w", err)
		}
		v, err := core.ParseJSONValue(cf.GitValues[k])
		if err != nil {
			return nil, fmt.Errorf("claims file: git_values[%s]: %w", k, err)
		}
		if _, held := cs.Git[f]; !held {
			cs.Values[f] = v
		}
	}
	return cs, nil
}

// Fields lists every field the set has a claim on, sorted.
func (cs *ClaimSet) Fields() []core.Field {
	seen := map[core.Field]bool{}
	var out []core.Field
	add := func(f core.Field) {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	for f := range cs.Git {
		add(f)
	}
	for _, c := range cs.Live {
		add(c.Field)
	}
	slices.SortFunc(out, func(a, b core.Field) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Input is the arbiter input for field f at time now.
func (cs *ClaimSet) Input(f core.Field, now time.Time) Input {
	in := Input{Field: f, Now: now, Lookup: cs.Values}
	if g, ok := cs.Git[f]; ok {
		in.Git = &g
	}
	for _, c := range cs.Live {
		if c.Field == f {
			in.Live = append(in.Live, c)
		}
	}
	for _, c := range cs.History {
		if c.Field == f {
			in.History = append(in.History, c)
		}
	}
	return in
}

// GitValues is a GitLookup over a map of Git's values.
type GitValues map[core.Field]core.Value

// GitValue returns Git's value of f.
func (g GitValues) GitValue(f core.Field) (core.Value, bool, error) {
	v, ok := g[f]
	return v, ok && !v.Absent(), nil
}

// GitFields returns the fields matching p, sorted by address.
func (g GitValues) GitFields(p core.FieldPattern) ([]core.Field, error) {
	var out []core.Field
	for f := range g {
		if p.Match(f) {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b core.Field) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}

// Event kinds of an event stream.
const (
	EventClaim    = "claim"     // a live claim: an actor changes or claims a field
	EventGit      = "git"       // Git now holds this claim (a merged commit)
	EventGitValue = "git-value" // Git's value of a field that bounds or conditions read
	EventTick     = "tick"      // the clock advances; nothing else happens
)

// Event is one line of an events JSONL stream: a claim plus its kind and an optional note.
type Event struct {
	Kind string `json:"kind"`
	Note string `json:"note,omitempty"`
	// File, on a git event, is the repository file that defines the field: when a verdict asks
	// people and the policy names nobody, that file's code owners are asked (SimulateWith).
	File string `json:"file,omitempty"`
	core.ClaimJSON
}

// ReadEvents decodes a JSONL event stream. Blank lines and lines starting with # are skipped.
// Events must be in time order.
func ReadEvents(r io.Reader) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	line := 0
	var last time.Time
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		if err := core.UniqueKeys(b); errors.Is(err, core.ErrDuplicateKey) {
			return nil, fmt.Errorf("events line %d: %w", line, err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var ev Event
		if err := dec.Decode(&ev); err != nil {
			return nil, fmt.Errorf("events line %d: %w", line, err)
		}
		if dec.More() {
			return nil, fmt.Errorf("events line %d: trailing data after the JSON object", line)
		}
		switch ev.Kind {
		case EventClaim, EventGit, EventGitValue, EventTick:
		default:
			return nil, fmt.Errorf("events line %d: kind %q: want claim, git, git-value or tick", line, ev.Kind)
		}
		t, err := time.Parse(time.RFC3339, ev.At)
		if err != nil {
			return nil, fmt.Errorf("events line %d: at %q is not an RFC 3339 time", line, ev.At)
		}
		if t.Before(last) {
			return nil, fmt.Errorf("events line %d: at %s is before the previous event (%s)", line, ev.At, fmtTime(last))
		}
		last = t
		if err := checkEvent(ev); err != nil {
			return nil, fmt.Errorf("events line %d: %w", line, err)
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("events line %d: %w", line+1, err)
	}
	return out, nil
}

func checkEvent(ev Event) error {
	if ev.File != "" && ev.Kind != EventGit {
		return fmt.Errorf("file is for git events (the file that defines the field), not %s", ev.Kind)
	}
	switch ev.Kind {
	case EventTick:
		return nil
	case EventGitValue:
		if _, err := core.ParseField(ev.Field); err != nil {
			return err
		}
		if len(ev.Value) == 0 {
			return errors.New("git-value has no value")
		}
		_, err := core.ParseJSONValue(ev.Value)
		return err
	}
	if ev.Field == "" {
		return errors.New("claim has no field")
	}
	_, err := ev.Claim(core.Field{}, time.Time{})
	return err
}
