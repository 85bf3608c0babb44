package events

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/parleyhq/parley/core"
)

// seedFiles adds every testdata file of a source to a fuzz target's seeds.
func seedFiles(f *testing.F, dir string) {
	paths, _ := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// checkBatch holds for every decoder: an error comes with an empty batch; a batch has only
// well-formed fields and every observation's event ID among the batch's IDs.
func checkBatch(t *testing.T, b Batch, err error) {
	if err != nil {
		if len(b.Observations)+len(b.Reverts)+len(b.OutOfSync)+len(b.EventIDs)+len(b.Ignored) != 0 {
			t.Fatalf("error %v with a partial batch", err)
		}
		return
	}
	ids := map[string]bool{}
	for _, id := range b.EventIDs {
		ids[id] = true
	}
	check := func(f core.Field, id string) {
		if _, perr := core.ParseField(f.String()); perr != nil {
			t.Fatalf("malformed field %#v: %v", f, perr)
		}
		if !ids[id] {
			t.Fatalf("event ID %q of %s is not in the batch's IDs %v", id, f, b.EventIDs)
		}
	}
	for _, o := range b.Observations {
		check(o.Field, o.EventID)
	}
	for _, r := range b.Reverts {
		check(r.Object, r.EventID)
	}
	for _, o := range b.OutOfSync {
		check(o.Object, o.EventID)
	}
}

func FuzzDecodeK8sAudit(f *testing.F) {
	seedFiles(f, "k8s-audit")
	f.Add([]byte(auditEvent("patch", "/x?fieldManager=m", "deployments", "apps", "", `[{"op":"add","path":"/a/-","value":1}]`, `{"a":[1]}`)))
	f.Add([]byte(auditEvent("patch", "/x", "deployments", "apps", "scale", `{"spec":{"replicas":null}}`, "")))
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := DecodeK8sAudit(body)
		checkBatch(t, b, err)
	})
}

func FuzzDecodeFlux(f *testing.F) {
	seedFiles(f, "flux")
	f.Add([]byte(`{"involvedObject":{"kind":"K","name":"n"},"timestamp":"2026-01-01T00:00:00Z","message":"A/b configured\nC/d/e created"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := DecodeFlux(body)
		checkBatch(t, b, err)
	})
}

func FuzzDecodeArgoCD(f *testing.F) {
	seedFiles(f, "argocd")
	f.Add([]byte(`{"event":"sync-succeeded","app":{"name":"a"},"operation":{"syncResult":{"resources":[{"kind":"K","name":"n","status":"Synced","message":"k/n configured"}]}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := DecodeArgoCD(body)
		checkBatch(t, b, err)
	})
}

func FuzzDecodeCloudTrail(f *testing.F) {
	seedFiles(f, "cloudtrail")
	f.Add([]byte(`{"eventID":"e","eventTime":"2026-01-01T00:00:00Z","eventSource":"autoscaling.amazonaws.com","eventName":"CreateOrUpdateTags","requestParameters":{"tags":[{"resourceId":"kafka-consumer","key":"k","value":"v"}]}}`))
	ix := testTFIndex(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := DecodeCloudTrail(body, ix)
		checkBatch(t, b, err)
	})
}

// FuzzOriginOf: reading where an event's objects are kept never panics, agrees with the decoder on
// what is JSON, and returns repoURLs and accounts without repeats or empty entries.
func FuzzOriginOf(f *testing.F) {
	seedFiles(f, "argocd")
	seedFiles(f, "cloudtrail")
	f.Add([]byte(`{"app":{"name":"w","sources":[{"repoURL":"git@github.com:a/b.git","ref":"v"},{"repoURL":"https://github.com/a/c","path":"x"}]}}`))
	f.Add([]byte(`{"account":"123456789012","detail":{"recipientAccountId":""}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, src := range []string{SourceArgoCD, SourceCloudTrail} {
			o, err := OriginOf(src, body)
			if err != nil {
				continue
			}
			for _, list := range [][]string{o.RepoURLs, o.Accounts} {
				seen := map[string]bool{}
				for _, s := range list {
					if s == "" || seen[s] {
						t.Fatalf("%s: empty or repeated entry in %q", src, list)
					}
					seen[s] = true
				}
			}
		}
	})
}

// FuzzDecodeAdmissionReview: an AdmissionReview is outside input (anyone who reaches the webhook
// can send one). Decoding never panics; an error leaves nothing half read; a decoded review has a
// uid, well-formed fields, each change of it, and either changes or the reason it has none.
func FuzzDecodeAdmissionReview(f *testing.F) {
	seedFiles(f, "admission")
	f.Fuzz(func(t *testing.T, body []byte) {
		a, err := DecodeAdmissionReview(body, admissionAt)
		if err != nil {
			if a.UID != "" || len(a.Changes) != 0 || a.Skipped != "" {
				t.Fatalf("error %v with a partial admission %+v", err, a)
			}
			return
		}
		if a.UID == "" {
			t.Fatal("decoded without a uid")
		}
		if (len(a.Changes) == 0) == (a.Skipped == "") {
			t.Fatalf("changes %d, skipped %q", len(a.Changes), a.Skipped)
		}
		for _, c := range a.Changes {
			if _, perr := core.ParseField(c.Field.String()); perr != nil {
				t.Fatalf("malformed field %#v: %v", c.Field, perr)
			}
			if c.EventID != a.UID || c.Source != SourceAdmission || c.Field.Object() != a.Object {
				t.Fatalf("change %+v of admission %s on %s", c, a.UID, a.Object)
			}
		}
	})
}
