package core

import "testing"

// TestFieldStringAllocatesOnce pins Field.String to one allocation (issue 37): the drift state
// writes a field's text for every swap, claim and verdict of a recorded admission review, and a
// builder grown byte by byte from empty made each call about five.
func TestFieldStringAllocatesOnce(t *testing.T) {
	for _, f := range []Field{
		K8sField("apps", "Deployment", "prod", "svc-1", "/spec/replicas"),
		K8sField("", "ConfigMap", "prod", "cfg-1", "/data/KEY_1"),
		K8sField("", "Namespace", "", "prod", ""),
		TFField("infra/svc-1", "aws_autoscaling_group.g1", "/desired_capacity"),
	} {
		if got := testing.AllocsPerRun(100, func() { _ = f.String() }); got > 1 {
			t.Errorf("%s: %.1f allocations, want 1", f, got)
		}
	}
}
