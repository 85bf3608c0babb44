package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

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

// reviewOfficial is how a review was decoded before decodeReview: json.Unmarshal into the
// official k8s.io/api/admission/v1 types, then each object decoded again as a tree.
func reviewOfficial(body []byte) (review, error) {
	var rev admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &rev); err != nil {
		return review{}, err
	}
	out := review{Kind: rev.Kind, APIVersion: rev.APIVersion}
	if r := rev.Request; r != nil {
		q := &reviewRequest{UID: string(r.UID), SubResource: r.SubResource, Name: r.Name, Namespace: r.Namespace, Operation: r.Operation, DryRun: r.DryRun}
		q.Resource.Group, q.Resource.Resource = r.Resource.Group, r.Resource.Resource
		q.UserInfo.Username, q.UserInfo.Groups = r.UserInfo.Username, r.UserInfo.Groups
		tree := func(raw []byte) (any, error) {
			if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
				return nil, nil
			}
			return decodeTree(raw)
		}
		var err error
		if q.Object, err = tree(r.Object.Raw); err != nil {
			return review{}, err
		}
		if q.OldObject, err = tree(r.OldObject.Raw); err != nil {
			return review{}, err
		}
		if len(r.Options.Raw) > 0 {
			q.Options = json.RawMessage(r.Options.Raw)
		}
		out.Request = q
	}
	return out, nil
}

// FuzzDecodeReviewMatchesOfficialTypes: the one-pass decoding reads every review the official
// types read, to the same values (objects as the same trees, numbers exact); it refuses only what
// they refuse, and a review in which two keys fill one field (keysFoldTogether). (The converse need not hold: a value of the wrong type in a field Parley never
// reads, such as userInfo.extra, no longer refuses a review.)
func FuzzDecodeReviewMatchesOfficialTypes(f *testing.F) {
	seedFiles(f, "admission")
	f.Add([]byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u","object":null,"oldObject":{"a":[1.50,2e0]},"options":null}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if core.UniqueKeys(body) != nil {
			return // refused before decoding by the admission door (app.Admission.judge)
		}
		want, werr := reviewOfficial(body)
		got, err := decodeReview(body)
		folded := keysFoldTogether(body)
		switch {
		case folded && err == nil:
			t.Fatalf("decodeReview read a review in which two keys fill one field")
		case !folded && errors.Is(err, errFoldedTwice):
			t.Fatalf("decodeReview refused for two keys filling one field, which the map reading does not find: %v", err)
		case folded:
			return // refused: the official types keep one of the two, Parley neither
		case werr == nil && err != nil:
			t.Fatalf("the official types read it, decodeReview refuses it: %v", err)
		case werr == nil:
			if got.Request != nil && got.Request.Options != nil && bytes.Equal(bytes.TrimSpace(got.Request.Options), []byte("null")) {
				got.Request.Options = nil // RawExtension keeps no "null"; fieldManager reads both as none
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decodeReview  %#v\nofficial types %#v", got, want)
			}
		}
	})
}

// keysFoldTogether is the plain reading of foldedTwice's rule, for the fuzz targets: each object
// of the review that decodes into a struct (the review, its request, the request's resource and
// userInfo) read into a map, and any two of its keys that equal one field name without regard to
// case (as encoding/json matches them) reported.
func keysFoldTogether(body []byte) bool {
	var check func(raw []byte, level string) bool
	check = func(raw []byte, level string) bool {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return false
		}
		for _, field := range reviewFields[level] {
			n := 0
			for k, v := range obj {
				if !strings.EqualFold(k, field) {
					continue
				}
				n++
				below := level + "." + field
				if level == "review" {
					below = field
				}
				if _, ok := reviewFields[below]; ok && check(v, below) {
					return true
				}
			}
			if n > 1 {
				return true
			}
		}
		return false
	}
	return check(body, "review")
}
