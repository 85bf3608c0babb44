package events

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/parleyhq/parley/core"
)

// EventIDs returns the IDs of the events in body that Parley may act on, as the decoder of source
// reads them, and the counts of what it left out, by reason. The event receivers (POST /events/...)
// call it before storing a body: no IDs means nothing in the body matters, and the body is answered
// "ignored" without being stored. An error means the body is not what source sends; it is the
// decoder's error, naming what was wrong. An unknown source is an error too.
//
// For Flux, Argo CD and the Kubernetes audit log the IDs are the decoder's Batch.EventIDs. CloudTrail
// needs the repository's Terraform to decide whether a call changed a managed resource, and the
// receiver has no repository at hand; so for CloudTrail the IDs are those of every successful,
// non-read-only API call Parley has a mapping for (docs/events.md, "Mappings"), whether or not the
// Terraform declares the resource. The processing side decodes again with the real index and counts
// the calls outside Terraform as "not-in-terraform" then. Those calls are therefore not in the
// ignored counts returned here.
func EventIDs(source string, body []byte) (ids []string, ignored map[string]int, err error) {
	id, err := Identify(source, body)
	return id.IDs, id.Ignored, err
}

// Identified is what Identify reads of a body: EventIDs' answer, and when the events it names
// happened.
type Identified struct {
	IDs     []string
	Ignored map[string]int
	// Oldest and Newest are the earliest and latest times of the events IDs names (zero when
	// none carries a time): the event receivers refuse a body outside their freshness window,
	// which is how an old signed body replayed long after is told from news.
	Oldest, Newest time.Time
}

// span widens the identified span to t; a zero t changes nothing.
func (id *Identified) span(t time.Time) {
	if t.IsZero() {
		return
	}
	if id.Oldest.IsZero() || t.Before(id.Oldest) {
		id.Oldest = t
	}
	if t.After(id.Newest) {
		id.Newest = t
	}
}

// Identify is EventIDs with the events' times (see Identified).
func Identify(source string, body []byte) (Identified, error) {
	var (
		b   Batch
		err error
	)
	switch source {
	case SourceFlux:
		b, err = DecodeFlux(body)
	case SourceArgoCD:
		b, err = DecodeArgoCD(body)
	case SourceK8sAudit:
		b, err = DecodeK8sAudit(body)
	case SourceCloudTrail:
		return cloudTrailIDs(body)
	default:
		return Identified{}, fmt.Errorf("event IDs: unknown source %q (want %s, %s, %s or %s)",
			source, SourceFlux, SourceArgoCD, SourceK8sAudit, SourceCloudTrail)
	}
	if err != nil {
		return Identified{}, err
	}
	id := Identified{IDs: b.EventIDs, Ignored: b.Ignored}
	for _, o := range b.Observations {
		id.span(o.At)
	}
	for _, r := range b.Reverts {
		id.span(r.At)
	}
	for _, o := range b.OutOfSync {
		id.span(o.At)
	}
	return id, nil
}

// ignNotInTerraform is DecodeCloudTrail's reason for a mapped call on a resource the index does not
// know: with a nil index, every mapped call.
const ignNotInTerraform = "not-in-terraform"

// cloudTrailIDs decodes body once without a Terraform index, which validates it exactly as the
// processing side will and counts every mapped call as not-in-terraform. When there is any, each
// record is decoded again on its own with a probe index that only notes whether it was asked: a
// record the decoder looks up in Terraform is a mapped, successful write with an eventID. Decoding
// record by record is what ties a lookup to its record's ID; an index that answered "found" instead
// would lose tag removals, which also need the Terraform's tag blocks to resolve.
func cloudTrailIDs(body []byte) (Identified, error) {
	b, err := DecodeCloudTrail(body, nil)
	if err != nil {
		return Identified{}, err
	}
	if b.Ignored[ignNotInTerraform] == 0 {
		return Identified{Ignored: b.Ignored}, nil
	}
	raws, err := cloudTrailRecords(body)
	if err != nil {
		return Identified{}, err
	}
	var id Identified
	seen := map[string]bool{}
	for i, raw := range raws {
		var probe tfProbe
		if _, err := DecodeCloudTrail(raw, &probe); err != nil {
			// The whole body decoded above, so a record cannot fail alone; say so if it does.
			return Identified{}, fmt.Errorf("cloudtrail: record %d: %w", i, err)
		}
		if !probe.asked {
			continue
		}
		var r struct {
			EventID   string `json:"eventID"`
			EventTime string `json:"eventTime"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return Identified{}, fmt.Errorf("cloudtrail: record %d: %w", i, jsonError(raw, err))
		}
		if r.EventID != "" && !seen[r.EventID] {
			seen[r.EventID] = true
			id.IDs = append(id.IDs, r.EventID)
			at, _ := time.Parse(time.RFC3339, r.EventTime) // the decoder above checked it
			id.span(at)
		}
	}
	ignored := make(map[string]int, len(b.Ignored))
	for reason, n := range b.Ignored {
		if reason != ignNotInTerraform {
			ignored[reason] = n
		}
	}
	// Every not-in-terraform count of the first pass belongs to a record kept above; what is left
	// is the part of the body nobody will ever act on.
	id.Ignored = ignored
	return id, nil
}

// cloudTrailRecords splits a body DecodeCloudTrail accepted into its records: the Records array, the
// detail of an EventBridge envelope, or the body itself.
func cloudTrailRecords(body []byte) ([]json.RawMessage, error) {
	var top struct {
		Records    []json.RawMessage `json:"Records"`
		DetailType *string           `json:"detail-type"`
		Detail     json.RawMessage   `json:"detail"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("cloudtrail: decode: %w", jsonError(body, err))
	}
	switch {
	case top.Records != nil:
		return top.Records, nil
	case top.DetailType != nil:
		return []json.RawMessage{top.Detail}, nil
	}
	return []json.RawMessage{body}, nil
}

// tfProbe is a TerraformIndex that knows no resource and remembers whether it was asked.
type tfProbe struct{ asked bool }

func (p *tfProbe) FindResource(string, string, core.Value) (core.Field, bool) {
	p.asked = true
	return core.Field{}, false
}
