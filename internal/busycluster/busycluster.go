// Package busycluster is the benchmarks' busy cluster: the demo repository with 1,000 more
// Deployments (Build), and the admission reviews the API server of such a cluster sends Parley
// (Review). The Go benchmarks of app and the end-to-end program bench/admission share it, so that
// their figures are of the same repository and the same requests.
package busycluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/parleyhq/parley/internal/demo"
)

// Deployments is how many Deployments Build adds to the demo: svc-0 to svc-999 in prod, of 10
// fields each, 10,000 fields under the demo policy's Deployment blocks.
const Deployments = 1000

// ServicesFile is where Build writes them, in the repository.
const ServicesFile = "k8s/prod/services.yaml"

// The writers of the busy cluster, as the API server names them in a review's userInfo.
const (
	HPA           = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
	CostOptimizer = "system:serviceaccount:finops:cost-optimizer"
)

// Build writes the demo repository into dir (which must not exist or be empty) and commits the
// Deployments on top of it, on the default branch. The commit is unsigned and by an author the
// demo policy does not know, as a bulk import by a script would be; its time is fixed, so equal
// runs give equal commits.
func Build(dir string) (demo.Result, error) {
	res, err := demo.Build(dir)
	if err != nil {
		return demo.Result{}, err
	}
	var manifests strings.Builder
	for i := range Deployments {
		fmt.Fprintf(&manifests, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: svc-%d\n  namespace: prod\n  labels: {app: svc-%d, team: t%d}\n"+
			"spec:\n  replicas: 2\n  selector: {matchLabels: {app: svc-%d}}\n  template:\n    metadata: {labels: {app: svc-%d}}\n"+
			"    spec:\n      containers:\n        - name: app\n          image: registry.example.com/svc-%d:1.0.0\n          resources: {requests: {cpu: 100m, memory: 128Mi}}\n",
			i, i, i%7, i, i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, ServicesFile), []byte(manifests.String()), 0o644); err != nil {
		return demo.Result{}, fmt.Errorf("busycluster: %w", err)
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return demo.Result{}, fmt.Errorf("busycluster: open %s: %w", dir, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return demo.Result{}, fmt.Errorf("busycluster: work tree of %s: %w", dir, err)
	}
	if _, err := wt.Add(ServicesFile); err != nil {
		return demo.Result{}, fmt.Errorf("busycluster: add %s: %w", ServicesFile, err)
	}
	who := &object.Signature{Name: "Service Import", Email: "import@parley.example", When: time.Date(2026, time.November, 8, 9, 0, 0, 0, time.UTC)}
	head, err := wt.Commit(fmt.Sprintf("Add %d services", Deployments), &git.CommitOptions{Author: who, Committer: who})
	if err != nil {
		return demo.Result{}, fmt.Errorf("busycluster: commit %s: %w", ServicesFile, err)
	}
	res.Head = head.String()
	res.Commits++
	return res, nil
}

// Write is what a review of the mix asks.
type Write int

const (
	// HPAScale is the HPA scaling a Deployment up (the policy accepts it, and records it as a
	// standing live claim).
	HPAScale Write = iota
	// CostScaleDown is the cost optimizer scaling a Deployment down to 1 (refused).
	CostScaleDown
	// ConfigMapEdit is an edit of a ConfigMap, which no field block of the policy covers.
	ConfigMapEdit
)

// Mix is the write of the i-th review: of every 10, 5 are the HPA scaling, 3 the cost optimizer
// scaling down and 2 ConfigMap edits, each on Deployment (or ConfigMap) svc-(i mod Deployments).
func Mix(i int) Write {
	switch i % 10 {
	case 0, 1, 2, 3, 4:
		return HPAScale
	case 5, 6, 7:
		return CostScaleDown
	}
	return ConfigMapEdit
}

// Review is the i-th AdmissionReview v1 of the mix, as the API server sends it for cluster prod:
// an UPDATE with its oldObject, by the writer Mix names, UID "uid-<i>".
func Review(i int) []byte {
	name := fmt.Sprintf("svc-%d", i%Deployments)
	req := &admissionv1.AdmissionRequest{UID: types.UID(fmt.Sprintf("uid-%d", i)), Operation: admissionv1.Update, Name: name, Namespace: "prod",
		UserInfo: authnv1.UserInfo{Groups: []string{"system:authenticated"}}, DryRun: new(bool)}
	scale := func(replicas int) runtime.RawExtension {
		return runtime.RawExtension{Raw: fmt.Appendf(nil, `{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":%q,"namespace":"prod"},"spec":{"replicas":%d}}`, name, replicas)}
	}
	switch Mix(i) {
	case HPAScale, CostScaleDown:
		req.Kind = metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
		req.Resource = metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
		req.SubResource = "scale"
		req.UserInfo.Username, req.Object, req.OldObject = HPA, scale(3+i%20), scale(2)
		if Mix(i) == CostScaleDown {
			req.UserInfo.Username, req.Object = CostOptimizer, scale(1)
		}
	case ConfigMapEdit:
		cm := func(v int) runtime.RawExtension {
			return runtime.RawExtension{Raw: fmt.Appendf(nil, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":%q,"namespace":"prod"},"data":{"a":"%d"}}`, name, v)}
		}
		req.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
		req.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}
		req.UserInfo.Username, req.Object, req.OldObject = CostOptimizer, cm(i), cm(0)
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{Kind: "AdmissionReview", APIVersion: "admission.k8s.io/v1"}, Request: req})
	if err != nil {
		panic(fmt.Sprintf("busycluster: encode review %d: %v", i, err)) // the types above always encode
	}
	return b
}
