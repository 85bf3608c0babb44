package argodiff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	argodiff "github.com/argoproj/argo-cd/v3/util/argo/diff"
	"github.com/argoproj/argo-cd/v3/util/argo/normalizers"
	gitopsdata "github.com/argoproj/gitops-engine/pkg/diff/testdata"
	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/managedfields"
	openapiproto "k8s.io/kube-openapi/pkg/util/proto"
	"sigs.k8s.io/yaml"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/gitops"
)

// replicasAddress is the field an HPA takes over: the one Parley yields in these tests.
const replicasAddress = "k8s:apps/Deployment/prod/web#/spec/replicas"

// application is an Application as a user keeps it in Git: a comment, automated sync, no
// ignoreDifferences and no syncOptions yet, so Parley has to create both.
const application = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: web
  namespace: argocd
spec:
  project: default # the shop
  source:
    repoURL: https://github.com/acme/infra
    targetRevision: main
    path: k8s/prod
  destination:
    server: https://kubernetes.default.svc
    namespace: prod
  syncPolicy:
    automated:
      prune: true
      selfHeal: true
`

// applicationSSA already has a sync option of the user's own, ServerSideApply=true, which also
// switches the controller to its structured-merge (server-side apply) diff.
const applicationSSA = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: web
  namespace: argocd
spec:
  project: default
  source:
    repoURL: https://github.com/acme/infra
    targetRevision: main
    path: k8s/prod
  destination:
    server: https://kubernetes.default.svc
    namespace: prod
  syncPolicy:
    automated:
      selfHeal: true
    syncOptions:
    - ServerSideApply=true # apply as argocd-controller
`

// applicationSet yields one Application per list element; the gate belongs in its template.
const applicationSet = `apiVersion: argoproj.io/v1alpha1
kind: ApplicationSet
metadata:
  name: web
  namespace: argocd
spec:
  goTemplate: true
  generators:
  - list:
      elements:
      - env: prod
  template:
    metadata:
      name: 'web-{{.env}}'
    spec:
      project: default
      source:
        repoURL: https://github.com/acme/infra
        targetRevision: main
        path: 'k8s/{{.env}}' # one directory per environment
      destination:
        server: https://kubernetes.default.svc
        namespace: '{{.env}}'
      syncPolicy:
        automated:
          selfHeal: true
`

// deployment is the desired state in Git: what Argo CD calls the target or config.
const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: prod
  labels:
    app: web
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: ghcr.io/acme/web:1.4.2
        ports:
        - containerPort: 8080
`

// argoObject is what a test needs from an Application or ApplicationSet once Argo CD's own types
// have decoded it: the spec its controller diffs with (an ApplicationSet's template spec is the
// spec of every Application it yields).
type argoObject struct {
	target gitops.Target
	text   string
	spec   func(t *testing.T, content []byte) v1alpha1.ApplicationSpec
	// lives: how the live objects of its resources look, given how it syncs.
	lives []liveStyle
}

var (
	clientSide         = []liveStyle{plain, clientSideApply}
	argoApplication    = argoObject{gitops.Target{Kind: "Application", Name: "web", Namespace: "argocd"}, application, appSpec, clientSide}
	argoApplicationSSA = argoObject{gitops.Target{Kind: "Application", Name: "web", Namespace: "argocd"}, applicationSSA, appSpec, []liveStyle{serverSideApply}}
	argoApplicationSet = argoObject{gitops.Target{Kind: "ApplicationSet", Name: "web", Namespace: "argocd"}, applicationSet, appSetSpec, clientSide}
)

// strict decodes into Argo CD's types and fails on any field they do not have. An unknown or
// misspelt field in what Parley wrote (ignoreDifference, jsonPointer, a sync option in the wrong
// place) must fail the test: a loose decoder would drop the key silently, the API server would
// prune it, and the gate would have no effect.
func strict(t *testing.T, content []byte, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(content, into); err != nil {
		t.Fatalf("Argo CD's types reject the YAML: %v\n%s", err, content)
	}
}

func appSpec(t *testing.T, content []byte) v1alpha1.ApplicationSpec {
	t.Helper()
	var app v1alpha1.Application
	strict(t, content, &app)
	return app.Spec
}

func appSetSpec(t *testing.T, content []byte) v1alpha1.ApplicationSpec {
	t.Helper()
	var set v1alpha1.ApplicationSet
	strict(t, content, &set)
	return set.Spec.Template.Spec
}

func replicasField(t *testing.T) core.Field {
	t.Helper()
	f, err := core.ParseField(replicasAddress)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// gated is the object after Parley yields the replicas field: gitops.AddGate's real output.
func gated(t *testing.T, o argoObject) []byte {
	t.Helper()
	out, changed, err := gitops.AddGate("apps/web.yaml", []byte(o.text), o.target, gitops.Gate{Field: replicasField(t), Rule: "hpa-owns-replicas"})
	if err != nil || !changed {
		t.Fatalf("AddGate: changed=%v err=%v", changed, err)
	}
	return out
}

// resumed is the gated object after Parley resumes Git's control of the field.
func resumed(t *testing.T, o argoObject, gatedText []byte) []byte {
	t.Helper()
	out, changed, err := gitops.RemoveGate("apps/web.yaml", gatedText, o.target, replicasField(t))
	if err != nil || !changed {
		t.Fatalf("RemoveGate: changed=%v err=%v", changed, err)
	}
	return out
}

func toUnstructured(t *testing.T, text string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(text), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// config is Git's Deployment, renamed when a test needs a second object.
func config(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	u := toUnstructured(t, deployment)
	u.SetName(name)
	return u
}

// liveStyle is how the controller that applied Git's Deployment left its traces on the live
// object, which decides how Argo CD's diff treats it.
type liveStyle int

const (
	// plain: no last-applied annotation, so Argo CD falls back to its two-way diff.
	plain liveStyle = iota
	// clientSideApply: kubectl's last-applied-configuration (Git's replicas, 3), as Argo CD's
	// default client-side apply leaves it, so Argo CD runs a three-way diff.
	clientSideApply
	// serverSideApply: managedFields as Argo CD's server-side apply (manager argocd-controller)
	// and then the HPA's scale update (kube-controller-manager) leave them; the Application
	// syncs with ServerSideApply=true, so Argo CD runs its structured-merge diff.
	serverSideApply
)

func (s liveStyle) String() string {
	return [...]string{"two-way diff", "three-way diff (last-applied)", "structured-merge diff (managedFields)"}[s]
}

// live is the Deployment as the cluster returns it after someone else wrote replicas and, for
// some tests, the image: Git's object plus the server's own fields (uid, defaults, status), so
// that a "not modified" result means Argo CD saw through all of them, not that the test fed it
// two identical maps.
func live(t *testing.T, name string, replicas int64, image string, style liveStyle) *unstructured.Unstructured {
	t.Helper()
	applied := config(t, name)
	u := applied.DeepCopy()
	set := func(v any, path ...string) {
		t.Helper()
		if err := unstructured.SetNestedField(u.Object, v, path...); err != nil {
			t.Fatal(err)
		}
	}
	set(replicas, "spec", "replicas")
	set("4f3c2a1e-0b7d-4c55-9a1e-2d6f0c8b9e10", "metadata", "uid")
	set("48213", "metadata", "resourceVersion")
	set(int64(2), "metadata", "generation")
	set("2026-11-20T08:00:00Z", "metadata", "creationTimestamp")
	set(map[string]any{"deployment.kubernetes.io/revision": "1"}, "metadata", "annotations")
	set(int64(600), "spec", "progressDeadlineSeconds")
	set(int64(10), "spec", "revisionHistoryLimit")
	set(map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": "25%", "maxUnavailable": "25%"}}, "spec", "strategy")
	set("Always", "spec", "template", "spec", "restartPolicy")
	set(int64(30), "spec", "template", "spec", "terminationGracePeriodSeconds")
	set("ClusterFirst", "spec", "template", "spec", "dnsPolicy")
	set("default-scheduler", "spec", "template", "spec", "schedulerName")
	set(map[string]any{}, "spec", "template", "spec", "securityContext")
	set([]any{map[string]any{
		"name":                     "web",
		"image":                    image,
		"imagePullPolicy":          "IfNotPresent",
		"ports":                    []any{map[string]any{"containerPort": int64(8080), "protocol": "TCP"}},
		"resources":                map[string]any{},
		"terminationMessagePath":   "/dev/termination-log",
		"terminationMessagePolicy": "File",
	}}, "spec", "template", "spec", "containers")
	set(map[string]any{"observedGeneration": int64(2), "replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas, "updatedReplicas": replicas}, "status")
	if style == serverSideApply {
		u.SetManagedFields(managedFields(t, replicas, image))
	}
	if style == clientSideApply {
		b, err := json.Marshal(applied.Object)
		if err != nil {
			t.Fatal(err)
		}
		u.SetAnnotations(map[string]string{
			"deployment.kubernetes.io/revision":                "1",
			"kubectl.kubernetes.io/last-applied-configuration": string(b),
		})
	}
	return u
}

// managedFields records who wrote what, as the API server would after Argo CD's server-side apply
// of Git's Deployment and then the other writers: an HPA scaling through the scale subresource
// takes spec.replicas over from argocd-controller (an Update moves ownership), and a kubectl
// set image takes the container's image.
func managedFields(t *testing.T, replicas int64, image string) []metav1.ManagedFieldsEntry {
	t.Helper()
	container := map[string]any{".": map[string]any{}, "f:name": map[string]any{}, "f:image": map[string]any{},
		"f:ports": map[string]any{`k:{"containerPort":8080,"protocol":"TCP"}`: map[string]any{".": map[string]any{}, "f:containerPort": map[string]any{}}}}
	spec := map[string]any{"f:replicas": map[string]any{}, "f:selector": map[string]any{},
		"f:template": map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{"f:app": map[string]any{}}},
			"f:spec": map[string]any{"f:containers": map[string]any{`k:{"name":"web"}`: container}}}}
	argo := map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{"f:app": map[string]any{}}}, "f:spec": spec}
	entry := func(manager string, op metav1.ManagedFieldsOperationType, subresource string, fields map[string]any) metav1.ManagedFieldsEntry {
		b, err := json.Marshal(fields)
		if err != nil {
			t.Fatal(err)
		}
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "apps/v1", FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: b}, Subresource: subresource}
	}
	var others []metav1.ManagedFieldsEntry
	if replicas != 3 {
		delete(spec, "f:replicas")
		others = append(others, entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "scale",
			map[string]any{"f:spec": map[string]any{"f:replicas": map[string]any{}}}))
	}
	if image != "ghcr.io/acme/web:1.4.2" {
		delete(container, "f:image")
		others = append(others, entry("kubectl-set", metav1.ManagedFieldsOperationUpdate, "",
			map[string]any{"f:spec": map[string]any{"f:template": map[string]any{"f:spec": map[string]any{"f:containers": map[string]any{`k:{"name":"web"}`: map[string]any{"f:image": map[string]any{}}}}}}}))
	}
	return append([]metav1.ManagedFieldsEntry{entry("argocd-controller", metav1.ManagedFieldsOperationApply, "", argo)}, others...)
}

// gvkParser stands in for the one the controller builds from the destination cluster's OpenAPI
// document: without it the structured-merge diff deduces a schema, treats containers as an atomic
// list and reports the API server's own defaults (resources: {}) as drift. gitops-engine ships a
// Kubernetes OpenAPI v2 document for exactly its own structured-merge tests.
var gvkParser = sync.OnceValues(func() (*managedfields.GvkParser, error) {
	doc := &openapi_v2.Document{}
	if err := proto.Unmarshal(gitopsdata.OpenAPIV2Doc, doc); err != nil {
		return nil, err
	}
	models, err := openapiproto.NewOpenAPIData(doc)
	if err != nil {
		return nil, err
	}
	return managedfields.NewGVKParser(models, false)
})

// controllerDiff diffs lives against configs the way Argo CD's application controller does in
// CompareAppState (controller/state.go, v3.2.6): the spec's ignoreDifferences as diff settings,
// no system-level overrides, the argocd-controller manager, and the structured-merge diff when
// the spec syncs with ServerSideApply=true. No cache and no cluster, so no server-side diff.
func controllerDiff(t *testing.T, spec v1alpha1.ApplicationSpec, lives, configs []*unstructured.Unstructured) bool {
	t.Helper()
	parser, err := gvkParser()
	if err != nil {
		t.Fatal(err)
	}
	b := argodiff.NewDiffConfigBuilder().
		WithDiffSettings(spec.IgnoreDifferences, nil, false, normalizers.IgnoreNormalizerOpts{}).
		WithNoCache().
		WithGVKParser(parser).
		WithManager("argocd-controller")
	if spec.SyncPolicy != nil && spec.SyncPolicy.SyncOptions.HasOption("ServerSideApply=true") {
		b = b.WithStructuredMergeDiff(true)
	}
	cfg, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := argodiff.StateDiffs(lives, configs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range res.Diffs {
		if d.Modified && !res.Modified {
			t.Fatalf("diff %d is modified but the list is not", i)
		}
		if d.Modified {
			t.Logf("%s modified:\n live      %s\n predicted %s", configs[i].GetName(), d.NormalizedLive, d.PredictedLive)
		}
	}
	return res.Modified
}

func hasOption(spec v1alpha1.ApplicationSpec, opt string) bool {
	return spec.SyncPolicy != nil && spec.SyncPolicy.SyncOptions.HasOption(opt)
}

// TestGateDecodesIntoArgoTypes is the typed round-trip: what Parley writes is an
// ignoreDifferences entry and a sync option as Argo CD's own Go types read them.
func TestGateDecodesIntoArgoTypes(t *testing.T) {
	want := v1alpha1.ResourceIgnoreDifferences{Group: "apps", Kind: "Deployment", Name: "web", Namespace: "prod", JSONPointers: []string{"/spec/replicas"}}
	for _, o := range []argoObject{argoApplication, argoApplicationSSA, argoApplicationSet} {
		t.Run(o.target.Kind+"/"+firstOption(o), func(t *testing.T) {
			before := o.spec(t, []byte(o.text))
			if len(before.IgnoreDifferences) != 0 || hasOption(before, "RespectIgnoreDifferences=true") {
				t.Fatalf("the Git object already has a gate: %+v", before)
			}
			out := gated(t, o)
			spec := o.spec(t, out)
			if len(spec.IgnoreDifferences) != 1 {
				t.Fatalf("ignoreDifferences = %+v, want exactly %+v\n%s", spec.IgnoreDifferences, want, out)
			}
			if got := spec.IgnoreDifferences[0]; got.Group != want.Group || got.Kind != want.Kind || got.Name != want.Name ||
				got.Namespace != want.Namespace || !slices.Equal(got.JSONPointers, want.JSONPointers) ||
				len(got.JQPathExpressions) != 0 || len(got.ManagedFieldsManagers) != 0 {
				t.Errorf("ignoreDifferences[0] = %+v, want %+v", got, want)
			}
			// Without it the gate only hides the drift: a sync would still write Git's 3 back.
			if !hasOption(spec, "RespectIgnoreDifferences=true") {
				t.Errorf("syncOptions = %v, want RespectIgnoreDifferences=true", spec.SyncPolicy)
			}
			// The rest of the spec is the user's, untouched.
			before.IgnoreDifferences = spec.IgnoreDifferences
			if before.SyncPolicy != nil && spec.SyncPolicy != nil {
				before.SyncPolicy.SyncOptions = spec.SyncPolicy.SyncOptions
			}
			if a, b := mustJSON(t, before), mustJSON(t, spec); a != b {
				t.Errorf("the gate changed more than ignoreDifferences and syncOptions:\n%s\n%s", a, b)
			}
			if o.target.Kind == "Application" && !bytes.Contains(out, []byte("# ")) {
				t.Errorf("the user's comment is gone:\n%s", out)
			}
		})
	}
}

// TestGateSilencesOnlyTheYieldedField runs Argo CD's diff over the live Deployment after an HPA
// scaled it to 7 while Git says 3.
func TestGateSilencesOnlyTheYieldedField(t *testing.T) {
	const gitImage, otherImage = "ghcr.io/acme/web:1.4.2", "ghcr.io/acme/web:1.5.0-hotfix"
	type state int
	const (
		original    state = iota // the object as in Git before Parley: no gate
		withGate                 // after gitops.AddGate
		afterResume              // after gitops.RemoveGate
	)
	cases := []struct {
		name     string
		state    state
		object   string // the Deployment's name: web is gated, api is not
		replicas int64
		image    string
		modified bool
	}{
		{"no drift, no gate: the live object's server fields alone are not a diff", original, "web", 3, gitImage, false},
		{"replicas drift, no gate: Argo CD reports it", original, "web", 7, gitImage, true},
		{"replicas drift, gated: Argo CD stays in sync", withGate, "web", 7, gitImage, false},
		{"replicas and image drift, gated: the image still shows", withGate, "web", 7, otherImage, true},
		{"image drift alone, gated: still shows", withGate, "web", 3, otherImage, true},
		{"replicas drift on another Deployment, gated: the entry names one object", withGate, "api", 7, gitImage, true},
		{"replicas drift after resume: reported again", afterResume, "web", 7, gitImage, true},
	}
	for _, o := range []argoObject{argoApplication, argoApplicationSSA, argoApplicationSet} {
		out := gated(t, o)
		specs := map[state]v1alpha1.ApplicationSpec{
			original:    o.spec(t, []byte(o.text)),
			withGate:    o.spec(t, out),
			afterResume: o.spec(t, resumed(t, o, out)),
		}
		for _, style := range o.lives {
			for _, c := range cases {
				t.Run(fmt.Sprintf("%s/%s/%s/%s", o.target.Kind, firstOption(o), style, c.name), func(t *testing.T) {
					lv := live(t, c.object, c.replicas, c.image, style)
					got := controllerDiff(t, specs[c.state], []*unstructured.Unstructured{lv}, []*unstructured.Unstructured{config(t, c.object)})
					if got != c.modified {
						t.Errorf("Modified = %v, want %v (ignoreDifferences %+v)", got, c.modified, specs[c.state].IgnoreDifferences)
					}
				})
			}
		}
	}
}

// TestGateInAppWithManyResources diffs a whole application at once, as the controller does: the
// gated Deployment in sync, a second drifted one still out of sync.
func TestGateInAppWithManyResources(t *testing.T) {
	spec := appSpec(t, gated(t, argoApplication))
	lives := []*unstructured.Unstructured{live(t, "web", 7, "ghcr.io/acme/web:1.4.2", clientSideApply), live(t, "api", 3, "ghcr.io/acme/web:1.4.2", clientSideApply)}
	configs := []*unstructured.Unstructured{config(t, "web"), config(t, "api")}
	if controllerDiff(t, spec, lives, configs) {
		t.Error("gated replicas drift on web made the application out of sync")
	}
	lives[1] = live(t, "api", 9, "ghcr.io/acme/web:1.4.2", clientSideApply)
	if !controllerDiff(t, spec, lives, configs) {
		t.Error("replicas drift on the ungated api did not make the application out of sync")
	}
}

// TestGateNormalizesTargetForSync checks the first step of what RespectIgnoreDifferences=true
// makes a sync do: Argo CD's diff.Normalize (which the controller's sync path calls before it
// patches live values into the target) strips the yielded field from Git's Deployment and
// nothing else.
func TestGateNormalizesTargetForSync(t *testing.T) {
	spec := appSpec(t, gated(t, argoApplication))
	cfg, err := argodiff.NewDiffConfigBuilder().WithDiffSettings(spec.IgnoreDifferences, nil, false, normalizers.IgnoreNormalizerOpts{}).WithNoCache().Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := argodiff.Normalize([]*unstructured.Unstructured{live(t, "web", 7, "ghcr.io/acme/web:1.4.2", plain)}, []*unstructured.Unstructured{config(t, "web")}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	target := res.Targets[0]
	if _, found, _ := unstructured.NestedFieldNoCopy(target.Object, "spec", "replicas"); found {
		t.Errorf("normalized target still has spec.replicas: %v", target.Object["spec"])
	}
	if img, _, _ := unstructured.NestedSlice(target.Object, "spec", "template", "spec", "containers"); len(img) != 1 {
		t.Errorf("normalized target lost its containers: %v", target.Object["spec"])
	}
}

// TestResumeRestoresGit: after RemoveGate the object is byte for byte what the user had, Argo CD
// reads no gate from it, and the replicas drift is reported again.
func TestResumeRestoresGit(t *testing.T) {
	for _, o := range []argoObject{argoApplication, argoApplicationSSA, argoApplicationSet} {
		t.Run(o.target.Kind+"/"+firstOption(o), func(t *testing.T) {
			back := resumed(t, o, gated(t, o))
			if string(back) != o.text {
				t.Errorf("resume did not give back the original bytes:\n%s\n--- want\n%s", back, o.text)
			}
			spec := o.spec(t, back)
			if len(spec.IgnoreDifferences) != 0 || hasOption(spec, "RespectIgnoreDifferences=true") {
				t.Errorf("after resume ignoreDifferences=%+v syncPolicy=%+v", spec.IgnoreDifferences, spec.SyncPolicy)
			}
			if o.text == applicationSSA && !hasOption(spec, "ServerSideApply=true") {
				t.Error("resume removed the user's own sync option")
			}
			if !controllerDiff(t, spec, []*unstructured.Unstructured{live(t, "web", 7, "ghcr.io/acme/web:1.4.2", o.lives[len(o.lives)-1])}, []*unstructured.Unstructured{config(t, "web")}) {
				t.Error("after resume replicas drift is not reported")
			}
		})
	}
}

// firstOption names a test object by the sync options the user had in Git.
func firstOption(o argoObject) string {
	if strings.Contains(o.text, "ServerSideApply=true") {
		return "ServerSideApply"
	}
	return "ClientSideApply"
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGateOtherFields covers what the replicas case does not: the core API group (which Parley
// spells core and Argo CD matches as group ""), a pointer token with an RFC 6901 escape (a "/"
// inside an annotation key is "~1"), and a cluster-scoped object (no namespace in the entry).
func TestGateOtherFields(t *testing.T) {
	cases := []struct {
		name    string
		address string
		config  string
		yield   func(u *unstructured.Unstructured) // another writer's change to the yielded field
		other   func(u *unstructured.Unstructured) // a change to a field Git still owns
	}{
		{
			name:    "core group ConfigMap key",
			address: "k8s:core/ConfigMap/prod/settings#/data/LOG_LEVEL",
			config:  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: prod\ndata:\n  LOG_LEVEL: info\n  TIMEOUT: 30s\n",
			yield:   func(u *unstructured.Unstructured) { setString(t, u, "debug", "data", "LOG_LEVEL") },
			other:   func(u *unstructured.Unstructured) { setString(t, u, "5s", "data", "TIMEOUT") },
		},
		{
			name:    "annotation key with a slash",
			address: "k8s:apps/Deployment/prod/web#/metadata/annotations/example.com~1owner",
			config:  strings.Replace(deployment, "  labels:\n    app: web\nspec:", "  labels:\n    app: web\n  annotations:\n    example.com/owner: platform\nspec:", 1),
			yield: func(u *unstructured.Unstructured) {
				setString(t, u, "sre-oncall", "metadata", "annotations", "example.com/owner")
			},
			// Not a new annotation: a key only the live object has is no drift to Argo CD.
			other: func(u *unstructured.Unstructured) { setString(t, u, "web-canary", "metadata", "labels", "app") },
		},
		{
			name:    "cluster-scoped Namespace label",
			address: "k8s:core/Namespace/prod#/metadata/labels/team",
			config:  "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: prod\n  labels:\n    team: payments\n    tier: gold\n",
			yield:   func(u *unstructured.Unstructured) { setString(t, u, "checkout", "metadata", "labels", "team") },
			other:   func(u *unstructured.Unstructured) { setString(t, u, "silver", "metadata", "labels", "tier") },
		},
	}
	for _, c := range cases {
		for _, style := range []liveStyle{plain, clientSideApply} {
			t.Run(c.name+"/"+style.String(), func(t *testing.T) {
				f, err := core.ParseField(c.address)
				if err != nil {
					t.Fatal(err)
				}
				out, _, err := gitops.AddGate("apps/web.yaml", []byte(application), argoApplication.target, gitops.Gate{Field: f})
				if err != nil {
					t.Fatal(err)
				}
				spec := appSpec(t, out)
				if len(spec.IgnoreDifferences) != 1 || !slices.Equal(spec.IgnoreDifferences[0].JSONPointers, []string{f.Path}) {
					t.Fatalf("ignoreDifferences = %+v", spec.IgnoreDifferences)
				}
				cfg := toUnstructured(t, c.config)
				lv := func(changes ...func(*unstructured.Unstructured)) []*unstructured.Unstructured {
					u := cfg.DeepCopy()
					u.SetUID("0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5")
					u.SetResourceVersion("7731")
					if style == clientSideApply {
						b, err := json.Marshal(cfg.Object)
						if err != nil {
							t.Fatal(err)
						}
						setString(t, u, string(b), "metadata", "annotations", "kubectl.kubernetes.io/last-applied-configuration")
					}
					for _, change := range changes {
						change(u)
					}
					return []*unstructured.Unstructured{u}
				}
				configs := []*unstructured.Unstructured{cfg}
				original := appSpec(t, []byte(application))
				if controllerDiff(t, original, lv(), configs) {
					t.Error("no drift, no gate: modified")
				}
				if !controllerDiff(t, original, lv(c.yield), configs) {
					t.Error("yielded field drifted, no gate: not modified")
				}
				if controllerDiff(t, spec, lv(c.yield), configs) {
					t.Error("yielded field drifted, gated: modified")
				}
				if !controllerDiff(t, spec, lv(c.yield, c.other), configs) {
					t.Error("another field drifted too, gated: not modified")
				}
			})
		}
	}
}

func setString(t *testing.T, u *unstructured.Unstructured, v string, path ...string) {
	t.Helper()
	if err := unstructured.SetNestedField(u.Object, v, path...); err != nil {
		t.Fatal(err)
	}
}

// helmApplication installs a chart that lives in the repository: Argo CD renders it with Helm, so
// no manifest in Git names the Deployment; Parley renders it too to find which Application applies
// it.
const helmApplication = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: web
  namespace: argocd
spec:
  project: default
  source:
    repoURL: https://github.com/acme/infra
    targetRevision: main
    path: charts/web
    helm:
      valuesObject:
        replicas: 3
  destination:
    server: https://kubernetes.default.svc
    namespace: prod
  syncPolicy:
    automated:
      selfHeal: true
`

// TestGateOnHelmRenderedObject: Parley's discovery renders the chart, finds the Application that
// applies the rendered Deployment, and the gate it writes there makes Argo CD's diff ignore the
// HPA's replicas on that object while an image change still shows.
func TestGateOnHelmRenderedObject(t *testing.T) {
	tmpl := strings.NewReplacer("name: web\n", "name: {{ .Release.Name }}\n", "  namespace: prod\n", "", "replicas: 3\n", "replicas: {{ .Values.replicas }}\n").Replace(deployment)
	files := map[string][]byte{
		"clusters/prod/web.yaml":           []byte(helmApplication),
		"charts/web/Chart.yaml":            []byte("apiVersion: v2\nname: web\nversion: 0.3.0\n"),
		"charts/web/values.yaml":           []byte("replicas: 1\n"),
		"charts/web/templates/deploy.yaml": []byte(tmpl),
	}
	inv, problems := gitops.Discover(files)
	if len(problems) > 0 {
		t.Fatalf("discovery problems: %v", problems)
	}
	f := replicasField(t)
	pl, ok := inv.Locate(f)
	if !ok || pl.Chart != "charts/web" || pl.Manifest != "charts/web/templates/deploy.yaml" || len(pl.Managers) != 1 || pl.Managers[0].Target.Kind != "Application" {
		t.Fatalf("the rendered Deployment: %+v %v", pl, ok)
	}
	if v, ok := inv.RenderedValue(f); !ok || v.JSON() != "3" {
		t.Fatalf("rendered replicas %s %v, want the release's 3", v, ok)
	}
	m := pl.Managers[0]
	out, changed, err := gitops.AddGate(m.File, files[m.File], m.Target, gitops.Gate{Field: f, Rule: "hpa-owns-replicas"})
	if err != nil || !changed {
		t.Fatalf("AddGate: %v %v", changed, err)
	}
	spec := appSpec(t, out)
	const gitImage, otherImage = "ghcr.io/acme/web:1.4.2", "ghcr.io/acme/web:1.5.0-hotfix"
	for _, c := range []struct {
		name     string
		replicas int64
		image    string
		modified bool
	}{
		{"the HPA's replicas, gated: in sync", 7, gitImage, false},
		{"an image change on the gated object: still shows", 7, otherImage, true},
	} {
		for _, style := range clientSide {
			got := controllerDiff(t, spec, []*unstructured.Unstructured{live(t, "web", c.replicas, c.image, style)}, []*unstructured.Unstructured{config(t, "web")})
			if got != c.modified {
				t.Errorf("%s (%s): Modified = %v, want %v", c.name, style, got, c.modified)
			}
		}
	}
	if !controllerDiff(t, appSpec(t, []byte(helmApplication)), []*unstructured.Unstructured{live(t, "web", 7, gitImage, plain)}, []*unstructured.Unstructured{config(t, "web")}) {
		t.Error("without the gate the HPA's replicas must show")
	}
}
