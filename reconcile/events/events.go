package events

import (
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/trailers"
)

// Source names, as set in Observation.Source, Revert.Source and core.Evidence.Source.
const (
	SourceFlux       = "flux"
	SourceArgoCD     = "argocd"
	SourceK8sAudit   = "k8s-audit"
	SourceCloudTrail = "cloudtrail"
)

// The annotation (Kubernetes) and tag (AWS) keys by which an actor declares why it changed a field.
// Values use the trailer grammar: an intent word; "KIND [REF] [severity=S]"; an RFC 3339 time, a
// duration or whole days counted from the event's time.
const (
	AnnotationIntent     = "parley.dev/intent"
	AnnotationMotivation = "parley.dev/motivation"
	AnnotationExpires    = "parley.dev/expires"
)

// Observation is one field change seen outside Git, before a policy resolves the actor's name.
type Observation struct {
	Field core.Field
	Value core.Value // the live value now; absent for a removal
	// Identity is who changed it: the Kubernetes user or service account (the impersonated user when
	// the request impersonated one), or the AWS principal (the role ARN for assumed roles).
	Identity core.Identity
	// Via is the authenticated identity that impersonated Identity; zero when nobody impersonated.
	Via core.Identity
	// Manager is the SSA field manager, else the user agent's product token. It is a label for people
	// and never an identity: clients choose it freely.
	Manager    string
	At         time.Time
	Intent     core.Intent // declared through parley.dev/intent, else ""
	Motivation core.Motivation
	Expires    time.Time
	// Restated is true when the writer sent the field with the rest of its object (an update, a create,
	// a server-side apply, a PutMetricAlarm): the value may be unchanged. Claims drops restated
	// observations whose value equals Git's.
	Restated bool
	// Problems lists declarations that could not be read (a bad parley.dev/expires, ...). They never
	// fail the batch; the observation counts as undeclared on that point.
	Problems []string
	EventID  string // the source's own event ID: auditID, CloudTrail eventID, or a derived one (Flux)
	Source   string // SourceFlux, SourceArgoCD, SourceK8sAudit or SourceCloudTrail
}

// Revert says a GitOps tool just (re-)applied Git's version of an object, overwriting whatever live
// change there was: Flux "configured"/"created" lines, Argo CD sync results.
type Revert struct {
	Object core.Field // the object (Path ""); see GroupUnknown
	// GroupUnknown is true when the source names only the kind (Flux's change set does) and the kind
	// is not a built-in one, so Object.Group is "": match on kind, namespace and name.
	GroupUnknown bool
	Action       string // "configured", "created", "serverside-applied", ...
	Revision     string // the Git revision applied, e.g. "main@sha1:0a1b..."
	Controller   string // "kustomize-controller", "argocd-application-controller", ...
	At           time.Time
	EventID      string
	Source       string
}

// OutOfSync is an object a GitOps tool reports as differing from Git (Argo CD's OutOfSync).
type OutOfSync struct {
	Object   core.Field
	App      string // the Argo CD Application, namespace/name
	Revision string
	Health   string
	At       time.Time
	EventID  string
	Source   string
}

// Batch is what one payload decodes to.
type Batch struct {
	Observations []Observation
	Reverts      []Revert
	OutOfSync    []OutOfSync
	// Ignored counts events (or parts of events) left out, by reason, such as "read-verb" or
	// "unknown-api-call". Reasons are short fixed words, documented in docs/events.md.
	Ignored map[string]int
	// EventIDs lists, once each and in order, the IDs of the events that contributed observations,
	// reverts or out-of-sync objects: the evidence to store.
	EventIDs []string
	// Problems name the objects of events that were read but not judged: written with more
	// fields than MaxFieldsPerObject (each also counted in Ignored as "too-many-fields").
	Problems []string
	// Latest is the time of the body's newest event, whether or not it was left out: a body of
	// only irrelevant events still says what time it is, so that timers due by then can fire
	// before it is judged. Zero when no event carries a readable time.
	Latest time.Time
}

// saw notes that an event of the body happened at t.
func (b *Batch) saw(t time.Time) {
	if t.After(b.Latest) {
		b.Latest = t.UTC()
	}
}

func (b *Batch) ignore(reason string) {
	if b.Ignored == nil {
		b.Ignored = map[string]int{}
	}
	b.Ignored[reason]++
}

// addEventID records id once; decoders add IDs in event order, so a check of the last is enough
// for one event's many observations, and a set catches the rest.
func (b *Batch) addEventID(id string, seen map[string]bool) {
	if id == "" || seen[id] {
		return
	}
	seen[id] = true
	b.EventIDs = append(b.EventIDs, id)
}

// declaration reads the parley.dev/* keys from an annotations or tags map. at anchors relative
// expiries. Unreadable values become problems, not errors.
func declaration(get func(string) (string, bool), at time.Time) (core.Intent, core.Motivation, time.Time, []string) {
	var (
		intent   core.Intent
		mot      core.Motivation
		expires  time.Time
		problems []string
	)
	if s, ok := get(AnnotationIntent); ok {
		s = strings.ToLower(strings.TrimSpace(s))
		if s == "" || strings.ContainsAny(s, " \t\n") {
			problems = append(problems, AnnotationIntent+": want one intent word such as "+string(core.IntentAvailability))
		} else {
			intent = core.Intent(s)
		}
	}
	if s, ok := get(AnnotationMotivation); ok {
		m, err := trailers.ParseMotivation(s)
		if err != nil {
			problems = append(problems, AnnotationMotivation+": "+err.Error())
		} else {
			mot = m
		}
	}
	if s, ok := get(AnnotationExpires); ok {
		t, err := trailers.ParseExpires(strings.TrimSpace(s), at)
		if err != nil {
			problems = append(problems, AnnotationExpires+": "+err.Error())
		} else {
			expires = t
		}
	}
	return intent, mot, expires, problems
}

// isParleyKey reports whether an annotation or tag key belongs to the declaration convention; such
// keys are read as declarations, never observed as fields.
func isParleyKey(k string) bool { return strings.HasPrefix(k, "parley.dev/") }

// Claim turns the observation into a claim by actor (whose Name may still be empty: the arbiter
// resolves it). The intent is the declared one; the arbiter applies the actor's default intent and
// its trust rules.
func (o Observation) Claim(actor core.Actor) core.Claim {
	if actor.Identity.ID == "" {
		actor.Identity = o.Identity
	}
	return core.Claim{
		Field:      o.Field,
		Actor:      actor,
		Value:      o.Value,
		Intent:     o.Intent,
		Motivation: o.Motivation,
		At:         o.At,
		Expires:    o.Expires,
		Evidence:   core.Evidence{Source: o.Source, EventIDs: []string{o.EventID}},
	}
}

// ActorNamer names the policy actor behind an identity; "" when no actor matches. A policy adapts
// to it with func(id) string { if a := p.ResolveActor(id); a != nil { return a.Name }; return "" }.
type ActorNamer func(core.Identity) string

// GitValue returns Git's value of a field, and whether Git sets it at all.
type GitValue func(core.Field) (core.Value, bool)

// Claims turns a batch's observations into claims, in order. name may be nil (actors stay
// unresolved for the arbiter to name). git may be nil; when given, restated observations whose
// value equals Git's are dropped: the writer sent the field along with the rest of its object
// without changing it.
func Claims(b Batch, name ActorNamer, git GitValue) []core.Claim {
	out := make([]core.Claim, 0, len(b.Observations))
	for _, o := range b.Observations {
		if o.Restated && git != nil {
			if v, ok := git(o.Field); ok && v.Equal(o.Value) {
				continue
			}
		}
		a := core.Actor{Identity: o.Identity}
		if name != nil {
			a.Name = name(o.Identity)
		}
		out = append(out, o.Claim(a))
	}
	return out
}
