package events

import (
	"slices"
	"strings"
	"testing"
)

func TestEventIDs(t *testing.T) {
	tests := []struct {
		source, file string
		ids          []string
		ignored      string
	}{
		{SourceFlux, "flux/configured.json", []string{"flux-bb072d56d659ca544e2c956b87e8a6d2"}, "flux-deleted=1 flux-unchanged=3"},
		{SourceFlux, "flux/finished.json", nil, "flux-no-change-set=1"},
		{SourceFlux, "flux/error.json", nil, "flux-error-event=1"},
		{SourceArgoCD, "argocd/out-of-sync.json", []string{"argocd-a8bb56accd6f98d5da0c261ddf4ed6bc"}, ""},
		{SourceK8sAudit, "k8s-audit/mixed.json", []string{
			"0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d02", "0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d04", "0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d05",
			"0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d06", "0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d07", "0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d08",
			"0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d15"}, ""},
		{SourceCloudTrail, "cloudtrail/raw-record.json", []string{"a1b2c3d4-0116-4b5c-9d8e-0f1a2b3c4d5e"}, ""},
		{SourceCloudTrail, "cloudtrail/eventbridge-set-desired-capacity.json", []string{"a1b2c3d4-0001-4b5c-9d8e-0f1a2b3c4d5e"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			ids, ignored, err := EventIDs(tc.source, readTestdata(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids, tc.ids) {
				t.Errorf("ids = %q, want %q", ids, tc.ids)
			}
			if tc.ignored != "" && ignoredString(ignored) != tc.ignored {
				t.Errorf("ignored = %s, want %s", ignoredString(ignored), tc.ignored)
			}
		})
	}
}

// TestEventIDsCloudTrailCoversTerraform checks that the receiver's IDs for a Records file keep every
// event the processing side, with the repository's Terraform, turns into observations, and that
// read-only, failed and unknown calls are left out and counted.
func TestEventIDsCloudTrailCoversTerraform(t *testing.T) {
	body := readTestdata(t, "cloudtrail", "records.json")
	ids, ignored, err := EventIDs(SourceCloudTrail, body)
	if err != nil {
		t.Fatal(err)
	}
	b, err := DecodeCloudTrail(body, testTFIndex(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.EventIDs) == 0 {
		t.Fatal("the Terraform-mapped decode found no events: the test proves nothing")
	}
	for _, id := range b.EventIDs {
		if !slices.Contains(ids, id) {
			t.Errorf("event %s observed with the Terraform index is missing from the receiver's IDs %q", id, ids)
		}
	}
	if got, want := ignoredString(ignored), "error-code=1 read-only=1 unknown-api-call=1"; got != want {
		t.Errorf("ignored = %s, want %s", got, want)
	}
	if ignored[ignNotInTerraform] != 0 {
		t.Errorf("calls kept for the processing side are counted as ignored: %v", ignored)
	}
}

func TestEventIDsErrors(t *testing.T) {
	tests := []struct{ source, body, want string }{
		{"github", `{}`, `unknown source "github"`},
		{SourceFlux, `{"involvedObject": `, "flux: decode event"},
		{SourceFlux, `{"kind": "EventList"}`, "no involvedObject.kind"},
		{SourceArgoCD, `{"event": "out-of-sync"}`, "no app.name"},
		{SourceK8sAudit, `{"kind": "Pod"}`, `body is a "Pod"`},
		{SourceCloudTrail, `{"hello": 1}`, "neither a CloudTrail record"},
		{SourceCloudTrail, `{"Records": [{"eventID": "x"}]}`, "record 0 has no eventSource"},
	}
	for _, tc := range tests {
		ids, _, err := EventIDs(tc.source, []byte(tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("EventIDs(%s, %s) = %q, %v; want an error containing %q", tc.source, tc.body, ids, err, tc.want)
		}
	}
}

func TestEventIDsCloudTrailOtherDetailType(t *testing.T) {
	body := `{"version": "0", "id": "e1", "detail-type": "EC2 Instance State-change Notification", "source": "aws.ec2", "detail": {}}`
	ids, ignored, err := EventIDs(SourceCloudTrail, []byte(body))
	if err != nil || len(ids) != 0 || ignored["eventbridge-other-detail-type"] != 1 {
		t.Errorf("EventIDs = %q, %v, %v; want no IDs, eventbridge-other-detail-type counted", ids, ignored, err)
	}
}
