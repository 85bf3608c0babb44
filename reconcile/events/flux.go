package events

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1beta1"

	"github.com/parleyhq/parley/core"
)

// kindGroup maps built-in kinds to their API group (read-only after package initialisation).
var kindGroup = kindGroups()

// DecodeFlux decodes a notification-controller Event as the generic and generic-hmac providers POST
// it. When kustomize-controller applied changes, the message is its change set, one line per object:
// "Kind/namespace/name action" (cluster-scoped objects: "Kind/name action"). "configured" and
// "created" lines become Reverts: Flux just put Git's version back over a live change (or a deleted
// object). "unchanged", "deleted" (pruned) and "skipped" lines are counted in Ignored, as are events
// without a change set and error events.
//
// Flux events carry no ID; the EventID is derived: "flux-" and the first 32 hex digits of the
// SHA-256 of the involved object's UID (or kind/namespace/name when it has none), the reason, the
// timestamp and the message, so a redelivery of the same event has the same ID.
func DecodeFlux(body []byte) (Batch, error) {
	if err := core.UniqueKeys(body); errors.Is(err, core.ErrDuplicateKey) {
		return Batch{}, fmt.Errorf("flux: decode event: %w", err)
	}
	var ev eventv1.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return Batch{}, fmt.Errorf("flux: decode event: %w", jsonError(body, err))
	}
	io := ev.InvolvedObject
	switch {
	case io.Kind == "" || io.Name == "":
		return Batch{}, fmt.Errorf("flux: event has no involvedObject.kind and .name: not a notification-controller event")
	case ev.Timestamp.IsZero():
		return Batch{}, fmt.Errorf("flux: event about %s/%s/%s has no timestamp", io.Kind, io.Namespace, io.Name)
	}
	var b Batch
	b.saw(ev.Timestamp.Time)
	if ev.Severity == eventv1.EventSeverityError {
		b.ignore("flux-error-event")
		return b, nil
	}
	id := fluxEventID(&ev)
	at := ev.Timestamp.UTC()
	rev := fluxRevision(ev.Metadata, io.APIVersion)
	controller := ev.ReportingController
	found := false
	for line := range strings.SplitSeq(ev.Message, "\n") {
		obj, action, ok := parseChangeLine(line)
		if !ok {
			continue
		}
		found = true
		switch action {
		case "configured", "created":
		default:
			b.ignore("flux-" + action)
			continue
		}
		g, known := kindGroup[obj.Kind]
		obj.Group = g
		b.Reverts = append(b.Reverts, Revert{Object: obj, GroupUnknown: !known, Action: action, Revision: rev,
			Controller: controller, At: at, EventID: id, Source: SourceFlux})
	}
	if !found {
		b.ignore("flux-no-change-set")
		return b, nil
	}
	if len(b.Reverts) > 0 {
		b.EventIDs = []string{id}
	}
	return b, nil
}

// fluxActions are the actions of kustomize-controller's change set (fluxcd/pkg/ssa).
var fluxActions = map[string]bool{"created": true, "configured": true, "unchanged": true, "deleted": true, "skipped": true}

// parseChangeLine reads "Kind/namespace/name action" or "Kind/name action".
func parseChangeLine(line string) (core.Field, string, bool) {
	subject, action, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok || !fluxActions[action] {
		return core.Field{}, "", false
	}
	parts := strings.Split(subject, "/")
	for _, p := range parts {
		if p == "" {
			return core.Field{}, "", false
		}
	}
	switch len(parts) {
	case 2:
		return core.K8sField("", parts[0], "", parts[1], ""), action, true
	case 3:
		return core.K8sField("", parts[0], parts[1], parts[2], ""), action, true
	}
	return core.Field{}, "", false
}

// fluxRevision finds the applied revision. Flux controllers prefix metadata keys with the involved
// object's API group ("kustomize.toolkit.fluxcd.io/revision"); older events and other senders use
// the bare key "revision". The involved object's own group wins over other groups' keys.
func fluxRevision(md map[string]string, apiVersion string) string {
	group, _, _ := strings.Cut(apiVersion, "/")
	if v, ok := md[group+"/"+eventv1.MetaRevisionKey]; ok && group != "" {
		return v
	}
	if v, ok := md[eventv1.MetaRevisionKey]; ok {
		return v
	}
	best := ""
	for k := range md {
		if strings.HasSuffix(k, "/"+eventv1.MetaRevisionKey) && (best == "" || k < best) {
			best = k
		}
	}
	if best == "" {
		return ""
	}
	return md[best]
}

func fluxEventID(ev *eventv1.Event) string {
	h := sha256.New()
	io := ev.InvolvedObject
	who := string(io.UID)
	if who == "" {
		who = io.Kind + "/" + io.Namespace + "/" + io.Name
	}
	for _, s := range []string{who, ev.Reason, ev.Timestamp.UTC().Format("2006-01-02T15:04:05Z07:00"), ev.Message} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "flux-" + hex.EncodeToString(h.Sum(nil))[:32]
}
