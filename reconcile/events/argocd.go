package events

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parleyhq/parley/core"
)

// argoNotification is the body of the webhook template Parley ships in
// charts/parley/argocd-notifications.yaml (documented in docs/events.md). Resources and the
// operation state are Argo CD's own JSON (toJson of .app.status.resources and
// .app.status.operationState).
type argoNotification struct {
	Parley string `json:"parley"` // template format version, "v1"
	Event  string `json:"event"`  // "out-of-sync" or "sync-succeeded"
	App    struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		UID       string `json:"uid"`
		Project   string `json:"project"`
	} `json:"app"`
	Sync struct {
		Status   string `json:"status"`
		Revision string `json:"revision"`
	} `json:"sync"`
	Health       string         `json:"health"`
	ReconciledAt string         `json:"reconciledAt"`
	Resources    []argoResource `json:"resources"`
	Operation    *argoOperation `json:"operation"`
}

type argoResource struct {
	Group     string `json:"group"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Health    *struct {
		Status string `json:"status"`
	} `json:"health"`
	// In operationState.syncResult.resources:
	Message   string `json:"message"`
	HookPhase string `json:"hookPhase"`
}

type argoOperation struct {
	Phase      string `json:"phase"`
	FinishedAt string `json:"finishedAt"`
	SyncResult *struct {
		Revision  string         `json:"revision"`
		Resources []argoResource `json:"resources"`
	} `json:"syncResult"`
}

// DecodeArgoCD decodes the notification Parley's Argo CD template produces. An "out-of-sync"
// notification lists the Application's OutOfSync resources; a "sync-succeeded" notification turns
// the sync result's resources that Argo CD changed ("configured", "created", "serverside-applied")
// into Reverts. With server-side apply Argo CD reports "serverside-applied" for every applied
// resource, changed or not, so consumers pair such reverts with an earlier OutOfSync of the object.
//
// The EventID is "argocd-" and the first 32 hex digits of the SHA-256 of the Application's UID, the
// revision, the event and sync status, and the time (the operation's finishedAt for a sync, the
// Application's reconciledAt otherwise): one ID per notification, stable across redeliveries.
func DecodeArgoCD(body []byte) (Batch, error) {
	if err := core.UniqueKeys(body); errors.Is(err, core.ErrDuplicateKey) {
		return Batch{}, fmt.Errorf("argocd: decode notification: %w", err)
	}
	var n argoNotification
	if err := json.Unmarshal(body, &n); err != nil {
		return Batch{}, fmt.Errorf("argocd: decode notification: %w", jsonError(body, err))
	}
	if n.App.Name == "" {
		return Batch{}, fmt.Errorf("argocd: notification has no app.name: not the body of Parley's notification template")
	}
	app := n.App.Namespace + "/" + n.App.Name
	var b Batch
	if t, err := argoTime(n.ReconciledAt); err == nil {
		b.saw(t) // a notification left out still tells the time
	}
	switch n.Event {
	case "out-of-sync":
		at, err := argoTime(n.ReconciledAt)
		if err != nil {
			return Batch{}, fmt.Errorf("argocd: application %s: reconciledAt: %w", app, err)
		}
		id := argoEventID(&n, n.ReconciledAt)
		for _, r := range n.Resources {
			if r.Status != "OutOfSync" {
				continue
			}
			if r.Kind == "" || r.Name == "" {
				b.ignore("argocd-resource-without-name")
				continue
			}
			h := ""
			if r.Health != nil {
				h = r.Health.Status
			}
			b.OutOfSync = append(b.OutOfSync, OutOfSync{Object: core.K8sField(r.Group, r.Kind, r.Namespace, r.Name, ""),
				App: app, Revision: n.Sync.Revision, Health: h, At: at, EventID: id, Source: SourceArgoCD})
		}
		if len(b.OutOfSync) == 0 {
			b.ignore("argocd-nothing-out-of-sync")
			return b, nil
		}
		b.EventIDs = []string{id}
	case "sync-succeeded":
		op := n.Operation
		if op == nil || op.SyncResult == nil {
			b.ignore("argocd-no-sync-result")
			return b, nil
		}
		when := op.FinishedAt
		if when == "" {
			when = n.ReconciledAt
		}
		at, err := argoTime(when)
		if err != nil {
			return Batch{}, fmt.Errorf("argocd: application %s: operation.finishedAt: %w", app, err)
		}
		b.saw(at)
		rev := op.SyncResult.Revision
		if rev == "" {
			rev = n.Sync.Revision
		}
		id := argoEventID(&n, when)
		for _, r := range op.SyncResult.Resources {
			if r.HookPhase != "" {
				b.ignore("argocd-hook")
				continue
			}
			action := argoAction(r.Message)
			switch {
			case r.Status != "Synced":
				b.ignore("argocd-not-synced")
				continue
			case action != "configured" && action != "created" && action != "serverside-applied":
				b.ignore("argocd-unchanged")
				continue
			case r.Kind == "" || r.Name == "":
				b.ignore("argocd-resource-without-name")
				continue
			}
			b.Reverts = append(b.Reverts, Revert{Object: core.K8sField(r.Group, r.Kind, r.Namespace, r.Name, ""),
				Action: action, Revision: rev, Controller: "argocd-application-controller", At: at, EventID: id, Source: SourceArgoCD})
		}
		if len(b.Reverts) == 0 {
			return b, nil
		}
		b.EventIDs = []string{id}
	default:
		b.ignore("argocd-unknown-event")
	}
	return b, nil
}

// argoAction is the last word of a sync result message such as "deployment.apps/web configured".
func argoAction(msg string) string {
	msg = strings.TrimSpace(msg)
	if i := strings.LastIndexByte(msg, ' '); i >= 0 {
		return msg[i+1:]
	}
	return msg
}

func argoTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want an RFC 3339 time, got %q", s)
	}
	return t.UTC(), nil
}

func argoEventID(n *argoNotification, when string) string {
	h := sha256.New()
	who := n.App.UID
	if who == "" {
		who = n.App.Namespace + "/" + n.App.Name
	}
	for _, s := range []string{who, n.Sync.Revision, n.Event, n.Sync.Status, when} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "argocd-" + hex.EncodeToString(h.Sum(nil))[:32]
}
