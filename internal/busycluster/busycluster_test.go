package busycluster

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// TestBuildCommitsTheDeploymentsOnTheDemo: the busy repository is the demo's history plus one
// commit holding every Deployment, the same on every run.
func TestBuildCommitsTheDeploymentsOnTheDemo(t *testing.T) {
	var heads []string
	for range 2 {
		dir := filepath.Join(t.TempDir(), "repo")
		res, err := Build(dir)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("git", "-C", dir, "log", "--format=%H %s", "-2").Output()
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 2 || lines[0] != res.Head+" Add 1000 services" || strings.HasSuffix(lines[1], "Add 1000 services") {
			t.Fatalf("git log: %q (head %s)", lines, res.Head)
		}
		b, err := os.ReadFile(filepath.Join(dir, ServicesFile))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), "kind: Deployment\n"); n != Deployments || !strings.Contains(string(b), "name: svc-999\n") {
			t.Fatalf("%s holds %d Deployments", ServicesFile, n)
		}
		if st, err := exec.Command("git", "-C", dir, "status", "--porcelain").Output(); err != nil || len(st) != 0 {
			t.Fatalf("work tree not clean: %q %v", st, err)
		}
		heads = append(heads, res.Head)
	}
	if heads[0] != heads[1] {
		t.Errorf("two builds gave different heads: %v", heads)
	}
}

func TestReviewFollowsTheMix(t *testing.T) {
	count := map[Write]int{}
	for i := range 1000 {
		var rev admissionv1.AdmissionReview
		if err := json.Unmarshal(Review(i), &rev); err != nil || rev.Request == nil {
			t.Fatalf("review %d: %v", i, err)
		}
		r := rev.Request
		w := Mix(i)
		count[w]++
		want := map[Write]string{HPAScale: HPA, CostScaleDown: CostOptimizer, ConfigMapEdit: CostOptimizer}[w]
		if r.UserInfo.Username != want || r.Operation != admissionv1.Update || r.Namespace != "prod" || r.DryRun == nil || *r.DryRun {
			t.Fatalf("review %d (%v): %+v", i, w, r)
		}
		switch w {
		case HPAScale, CostScaleDown:
			if r.SubResource != "scale" || r.Resource.Resource != "deployments" || len(r.OldObject.Raw) == 0 {
				t.Fatalf("review %d is not a scale: %+v", i, r)
			}
		case ConfigMapEdit:
			if r.Kind.Kind != "ConfigMap" || r.Resource.Resource != "configmaps" {
				t.Fatalf("review %d is not a ConfigMap edit: %+v", i, r)
			}
		}
	}
	if count[HPAScale] != 500 || count[CostScaleDown] != 300 || count[ConfigMapEdit] != 200 {
		t.Errorf("mix of 1000: %v", count)
	}
}
