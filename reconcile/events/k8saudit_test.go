package events

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDecodeK8sAuditMixed(t *testing.T) {
	b, err := DecodeK8sAudit(readTestdata(t, "k8s-audit", "mixed.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		// HPA through the scale subresource, RequestResponse level: the parent Deployment's replicas.
		"k8s:apps/Deployment/prod/web#/spec/replicas = 7 by k8s-user:system:serviceaccount:kube-system:horizontal-pod-autoscaler [kube-controller-manager] restated",
		// JSON patch: replace and remove; test writes nothing.
		`k8s:core/ConfigMap/prod/settings#/data/LOG_LEVEL = "debug" by k8s-user:alice@example.com [kubectl-patch]`,
		"k8s:core/ConfigMap/prod/settings#/data/OLD_FLAG = (absent) by k8s-user:alice@example.com [kubectl-patch]",
		// Merge patch declaring intent, motivation and a relative expiry in annotations.
		"k8s:apps/Deployment/prod/web#/spec/replicas = 12 by k8s-user:oncall@example.com [kubectl-patch] intent=availability motivation=incident INC-4211 severity=high expires=2026-11-20T14:00:04Z",
		// Strategic merge patch: the container found by name in the response object, at index 1.
		`k8s:apps/Deployment/prod/web#/spec/template/spec/containers/1/image = "ghcr.io/acme/web:1.4.2" by k8s-user:release-bot [kubectl-set]`,
		// Server-side apply: the fields the applier states (Request level: its own list positions).
		`k8s:apps/Deployment/prod/api#/spec/template/spec/containers/0/resources/requests/cpu = "250m" by k8s-user:system:serviceaccount:agents:deploy-agent [deploy-agent] intent=cost motivation=rightsizing restated`,
		`k8s:apps/Deployment/prod/api#/spec/template/spec/containers/0/resources/requests/memory = "512Mi" by k8s-user:system:serviceaccount:agents:deploy-agent [deploy-agent] intent=cost motivation=rightsizing restated`,
		// Update under impersonation: bob is the actor, admin the one who impersonated.
		`k8s:core/ConfigMap/prod/flags#/data/checkout_v2 = "true" by k8s-user:bob@example.com via admin@example.com [kubectl] restated`,
		`k8s:core/ConfigMap/prod/flags#/data/limits = "{\"rps\": 50}" by k8s-user:bob@example.com via admin@example.com [kubectl] restated`,
		`k8s:core/ConfigMap/prod/flags#/metadata/labels/team = "web" by k8s-user:bob@example.com via admin@example.com [kubectl] restated`,
		// A merge patch on the scale subresource, no response object: the kind from the resource table.
		"k8s:apps/StatefulSet/prod/kafka#/spec/replicas = 5 by k8s-user:sre@example.com [kubectl]",
	}
	if got := obsLines(b); !slices.Equal(got, want) {
		t.Errorf("observations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantIgn := "delete-verb=1 dry-run=1 failed-request=1 no-request-object=1 noise-resource=2 read-verb=1 stage-not-response-complete=1 status-subresource=1"
	if got := ignoredString(b.Ignored); got != wantIgn {
		t.Errorf("ignored = %s, want %s", got, wantIgn)
	}
	wantIDs := []string{"0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d02", "0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d04", "0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d05",
		"0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d06", "0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d07", "0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d08", "0b6b9f0a-1c1e-4f5e-9a57-1d2a3b4c5d15"}
	if !slices.Equal(b.EventIDs, wantIDs) {
		t.Errorf("event IDs = %v, want %v", b.EventIDs, wantIDs)
	}
	hpa := b.Observations[0]
	if hpa.At != time.Date(2026, 11, 20, 10, 0, 1, 12_000_000, time.UTC) || hpa.Source != SourceK8sAudit || hpa.EventID != wantIDs[0] {
		t.Errorf("HPA observation at %v source %q id %q", hpa.At, hpa.Source, hpa.EventID)
	}
	if g := hpa.Identity.Groups; !slices.Contains(g, "system:serviceaccounts:kube-system") {
		t.Errorf("HPA groups = %v", g)
	}
}

// auditEvent builds one ResponseComplete event around a request (and optional response) object.
func auditEvent(verb, uri, resource, group, sub, req, resp string) string {
	s := `{"level":"Request","auditID":"id-1","stage":"ResponseComplete","verb":"` + verb + `","requestURI":"` + uri + `",` +
		`"user":{"username":"u"},"userAgent":"ua/1.0","objectRef":{"resource":"` + resource + `","namespace":"ns","name":"obj","apiGroup":"` + group + `","subresource":"` + sub + `"},` +
		`"responseStatus":{"metadata":{},"code":200},"stageTimestamp":"2026-11-20T10:00:00.000000Z"`
	if req != "" {
		s += `,"requestObject":` + req
	}
	if resp != "" {
		s += `,"responseObject":` + resp
	}
	return `{"kind":"EventList","apiVersion":"audit.k8s.io/v1","items":[` + s + `}]}`
}

func TestDecodeK8sAuditPatchTypes(t *testing.T) {
	dep := `{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"obj","namespace":"ns","labels":{"a":"1"}},"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"side","image":"s:1"},{"name":"app","image":"a:2","args":["--x","--y"]}]}}}}`
	cases := []struct {
		name    string
		body    string
		want    []string
		ignored string
	}{
		{"json patch add replace remove", auditEvent("patch", "/apis/apps/v1/namespaces/ns/deployments/obj", "deployments", "apps", "",
			`[{"op":"add","path":"/metadata/labels/b","value":"2"},{"op":"replace","path":"/spec/template","value":{"spec":{"priorityClassName":"high"}}},{"op":"remove","path":"/spec/paused"}]`, ""),
			[]string{`k8s:apps/Deployment/ns/obj#/metadata/labels/b = "2" by k8s-user:u [ua]`,
				`k8s:apps/Deployment/ns/obj#/spec/template/spec/priorityClassName = "high" by k8s-user:u [ua]`,
				`k8s:apps/Deployment/ns/obj#/spec/paused = (absent) by k8s-user:u [ua]`}, ""},
		{"json patch move copy and append resolved from the response", auditEvent("patch", "/x", "deployments", "apps", "",
			`[{"op":"move","from":"/metadata/labels/a","path":"/metadata/labels/c"},{"op":"add","path":"/spec/template/spec/containers/1/args/-","value":"--z"}]`,
			`{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"obj","labels":{"c":"1"}},"spec":{"template":{"spec":{"containers":[{"name":"side"},{"name":"app","args":["--x","--z"]}]}}}}`),
			[]string{`k8s:apps/Deployment/ns/obj#/metadata/labels/a = (absent) by k8s-user:u [ua]`,
				`k8s:apps/Deployment/ns/obj#/metadata/labels/c = "1" by k8s-user:u [ua]`,
				`k8s:apps/Deployment/ns/obj#/spec/template/spec/containers/1/args = ["--x","--z"] by k8s-user:u [ua]`}, ""},
		{"json patch copy without response is unresolved", auditEvent("patch", "/x", "deployments", "apps", "",
			`[{"op":"copy","from":"/metadata/labels/a","path":"/metadata/labels/c"},{"op":"replace","path":"/spec/replicas","value":4},{"op":"frobnicate","path":"/a"},{"op":"add","path":"bad"}]`, ""),
			[]string{`k8s:apps/Deployment/ns/obj#/spec/replicas = 4 by k8s-user:u [ua]`}, "patch-part-unresolved=3"},
		{"merge patch null removes", auditEvent("patch", "/x", "configmaps", "", "", `{"data":{"gone":null,"kept":"v"}}`, ""),
			[]string{`k8s:core/ConfigMap/ns/obj#/data/gone = (absent) by k8s-user:u [ua]`, `k8s:core/ConfigMap/ns/obj#/data/kept = "v" by k8s-user:u [ua]`}, ""},
		{"strategic merge directives", auditEvent("patch", "/x", "deployments", "apps", "",
			`{"metadata":{"labels":{"$patch":"delete"}},"spec":{"$retainKeys":["strategy"],"strategy":{"type":"Recreate","rollingUpdate":null},"template":{"spec":{"containers":[{"name":"side","$patch":"delete"},{"name":"app","image":"a:3","$deleteFromPrimitiveList/args":["--y"]}]}}}}`,
			`{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"obj"},"spec":{"strategy":{"type":"Recreate"},"template":{"spec":{"containers":[{"name":"app","image":"a:3","args":["--x"]}]}}}}`),
			[]string{`k8s:apps/Deployment/ns/obj#/metadata/labels = (absent) by k8s-user:u [ua]`,
				`k8s:apps/Deployment/ns/obj#/spec/strategy/rollingUpdate = (absent) by k8s-user:u [ua]`,
				`k8s:apps/Deployment/ns/obj#/spec/strategy/type = "Recreate" by k8s-user:u [ua]`,
				`k8s:apps/Deployment/ns/obj#/spec/template/spec/containers/0/args = ["--x"] by k8s-user:u [ua]`,
				`k8s:apps/Deployment/ns/obj#/spec/template/spec/containers/0/image = "a:3" by k8s-user:u [ua]`},
			"patch-part-unresolved=1"},
		{"strategic merge list without response is unresolved", auditEvent("patch", "/x", "deployments", "apps", "",
			`{"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"app","image":"a:3"}]}}}}`, ""),
			[]string{`k8s:apps/Deployment/ns/obj#/spec/replicas = 2 by k8s-user:u [ua]`}, "patch-part-unresolved=1"},
		{"apply with response takes live values and list positions", auditEvent("patch", "/x?fieldManager=argocd-controller&force=true", "deployments", "apps", "",
			`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"obj","namespace":"ns"},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"a:2"}]}}}}`, dep),
			[]string{`k8s:apps/Deployment/ns/obj#/spec/template/spec/containers/1/image = "a:2" by k8s-user:u [argocd-controller] restated`}, ""},
		{"update with response object", auditEvent("update", "/x", "deployments", "apps", "", dep,
			`{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"obj","labels":{"a":"1"}},"spec":{"replicas":5,"template":{"spec":{"containers":[{"name":"side","image":"s:1"},{"name":"app","image":"a:2","args":["--x","--y"]}]}}}}`),
			[]string{`k8s:apps/Deployment/ns/obj#/metadata/labels/a = "1" by k8s-user:u [ua] restated`,
				`k8s:apps/Deployment/ns/obj#/spec/replicas = 5 by k8s-user:u [ua] restated`,
				`k8s:apps/Deployment/ns/obj#/spec/template/spec/containers/0/image = "s:1" by k8s-user:u [ua] restated`,
				`k8s:apps/Deployment/ns/obj#/spec/template/spec/containers/0/name = "side" by k8s-user:u [ua] restated`,
				`k8s:apps/Deployment/ns/obj#/spec/template/spec/containers/1/args = ["--x","--y"] by k8s-user:u [ua] restated`,
				`k8s:apps/Deployment/ns/obj#/spec/template/spec/containers/1/image = "a:2" by k8s-user:u [ua] restated`,
				`k8s:apps/Deployment/ns/obj#/spec/template/spec/containers/1/name = "app" by k8s-user:u [ua] restated`}, ""},
		{"create takes the name from the object", strings.Replace(auditEvent("create", "/x", "horizontalpodautoscalers", "autoscaling", "",
			`{"kind":"HorizontalPodAutoscaler","apiVersion":"autoscaling/v2","metadata":{"name":"web"},"spec":{"minReplicas":2,"maxReplicas":10}}`, ""), `"name":"obj",`, "", 1),
			[]string{"k8s:autoscaling/HorizontalPodAutoscaler/ns/web#/spec/maxReplicas = 10 by k8s-user:u [ua] restated",
				"k8s:autoscaling/HorizontalPodAutoscaler/ns/web#/spec/minReplicas = 2 by k8s-user:u [ua] restated"}, ""},
		{"HPA scale update by kube-controller-manager without response", auditEvent("update", "/apis/apps/v1/namespaces/ns/deployments/obj/scale", "deployments", "apps", "scale",
			`{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"obj","namespace":"ns"},"spec":{"replicas":9},"status":{"replicas":3}}`, ""),
			[]string{"k8s:apps/Deployment/ns/obj#/spec/replicas = 9 by k8s-user:u [ua] restated"}, ""},
		{"scale of an unknown resource", auditEvent("update", "/x", "widgets", "example.com", "scale", `{"kind":"Scale","spec":{"replicas":9}}`, ""),
			nil, "unknown-resource-kind=1"},
		{"patch touching only status", auditEvent("patch", "/x", "deployments", "apps", "", `{"status":{"replicas":1}}`, ""),
			nil, "no-field-changed=1"},
		{"pods are noise", auditEvent("create", "/x", "pods", "", "", `{"kind":"Pod","metadata":{"name":"p"}}`, ""), nil, "noise-resource=1"},
		{"exec is another subresource", auditEvent("create", "/x", "pods2", "", "exec", `{}`, ""), nil, "other-subresource=1"},
		{"an unknown CRD patch without kind", auditEvent("patch", "/x", "widgets", "example.com", "", `{"spec":{"size":2}}`, ""), nil, "unknown-resource-kind=1"},
		{"a CRD update names its kind", auditEvent("update", "/x", "widgets", "example.com", "", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"obj"},"spec":{"size":2}}`, ""),
			[]string{"k8s:example.com/Widget/ns/obj#/spec/size = 2 by k8s-user:u [ua] restated"}, ""},
		{"bad declaration is a problem, not an error", auditEvent("patch", "/x", "configmaps", "", "", `{"metadata":{"annotations":{"parley.dev/expires":"tomorrow","parley.dev/intent":"cost"}},"data":{"k":"v"}}`, ""),
			[]string{`k8s:core/ConfigMap/ns/obj#/data/k = "v" by k8s-user:u [ua] intent=cost`}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := DecodeK8sAudit([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := obsLines(b); !slices.Equal(got, c.want) {
				t.Errorf("observations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if got := ignoredString(b.Ignored); got != c.ignored {
				t.Errorf("ignored = %q, want %q", got, c.ignored)
			}
			if (len(b.Observations) > 0) != (len(b.EventIDs) == 1) {
				t.Errorf("event IDs %v for %d observations", b.EventIDs, len(b.Observations))
			}
		})
	}
}

func TestDecodeK8sAuditProblems(t *testing.T) {
	b, err := DecodeK8sAudit([]byte(auditEvent("patch", "/x", "configmaps", "", "", `{"metadata":{"annotations":{"parley.dev/expires":"tomorrow","parley.dev/motivation":"vibes"}},"data":{"k":"v"}}`, "")))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Observations) != 1 || len(b.Observations[0].Problems) != 2 {
		t.Fatalf("want one observation with two problems, got %+v", b.Observations)
	}
	for _, p := range b.Observations[0].Problems {
		if !strings.HasPrefix(p, "parley.dev/") {
			t.Errorf("problem %q does not name its annotation", p)
		}
	}
}

func TestDecodeK8sAuditErrors(t *testing.T) {
	cases := []struct{ body, want string }{
		{``, "empty body"},
		{`{"kind":"EventList","items":[{"auditID":"a",}]}`, "invalid JSON at byte 45"},
		{`{"kind":"EventList","items":{"auditID":"a"}}`, "items"},
		{`{"kind":"Event","auditID":"a"}`, `"Event"`},
		{`[1,2]`, "want"},
	}
	for _, c := range cases {
		_, err := DecodeK8sAudit([]byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DecodeK8sAudit(%q) error = %v, want it to mention %q", c.body, err, c.want)
		}
	}
}
