package events

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// auditBatch builds a realistic audit webhook batch of n events, as a Metadata-level policy for
// noise and a Request/RequestResponse-level policy for workloads produce it: ~90% irrelevant events
// (reads, watches, lease renewals, event creation, status updates, earlier stages), ~10% field
// changes (HPA scale updates with request and response, merge patches, JSON patches). seq makes the
// audit IDs unique per batch.
func auditBatch(n, seq int) []byte {
	var b strings.Builder
	b.WriteString(`{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[`)
	user := `"user":{"username":"system:serviceaccount:kube-system:horizontal-pod-autoscaler","uid":"8a1f0c52-4c2e-4f0b-9d7a-2b3c4d5e6f70","groups":["system:serviceaccounts","system:serviceaccounts:kube-system","system:authenticated"]},"sourceIPs":["172.18.0.2"],"userAgent":"kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/2f1c8a7/system:serviceaccount:kube-system:horizontal-pod-autoscaler"`
	times := `"requestReceivedTimestamp":"2026-11-20T10:00:01.000000Z","stageTimestamp":"2026-11-20T10:00:01.012000Z","annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":"RBAC: allowed by ClusterRoleBinding \"system:controller:horizontal-pod-autoscaler\" of ClusterRole \"system:controller:horizontal-pod-autoscaler\" to ServiceAccount \"horizontal-pod-autoscaler/kube-system\""}`
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		id := fmt.Sprintf("%08x-1c1e-4f5e-9a57-%012x", seq, i)
		ns := fmt.Sprintf("team-%d", i%7)
		head := `{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"` + id + `",`
		switch i % 20 {
		case 0: // HPA scale, RequestResponse
			fmt.Fprintf(&b, `%s"level":"RequestResponse","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/%s/deployments/web-%d/scale","verb":"update",%s,"objectRef":{"resource":"deployments","namespace":"%s","name":"web-%d","apiGroup":"apps","apiVersion":"v1","subresource":"scale"},"responseStatus":{"metadata":{},"code":200},"requestObject":{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"web-%d","namespace":"%s","uid":"5f0c3a4e-7e1b-4b8e-9f59-0a4f2d9e1c11","resourceVersion":"81234"},"spec":{"replicas":%d},"status":{"replicas":4,"selector":"app=web"}},"responseObject":{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"web-%d","namespace":"%s","uid":"5f0c3a4e-7e1b-4b8e-9f59-0a4f2d9e1c11","resourceVersion":"81240","creationTimestamp":"2026-11-01T08:00:00Z"},"spec":{"replicas":%d},"status":{"replicas":4,"selector":"app=web"}},%s}`,
				head, ns, i, user, ns, i, i, ns, 3+i%9, i, ns, 3+i%9, times)
		case 10: // merge patch by a person, Request level
			fmt.Fprintf(&b, `%s"level":"Request","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/%s/configmaps/settings?fieldManager=kubectl-patch","verb":"patch","user":{"username":"alice@example.com","groups":["platform","system:authenticated"]},"sourceIPs":["10.0.0.12"],"userAgent":"kubectl/v1.36.0 (linux/amd64) kubernetes/6c1cd99","objectRef":{"resource":"configmaps","namespace":"%s","name":"settings","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestObject":{"metadata":{"annotations":{"parley.dev/intent":"availability","parley.dev/motivation":"incident INC-4211"}},"data":{"LOG_LEVEL":"debug","POOL":"%d"}},%s}`,
				head, ns, ns, i, times)
		case 15: // JSON patch, Request level
			fmt.Fprintf(&b, `%s"level":"Request","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/%s/deployments/api","verb":"patch","user":{"username":"release-bot","groups":["system:authenticated"]},"userAgent":"release-bot/2.1","objectRef":{"resource":"deployments","namespace":"%s","name":"api","apiGroup":"apps","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestObject":[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"ghcr.io/acme/api:%d"}],%s}`,
				head, ns, ns, i, times)
		case 1, 2, 3, 4, 5: // lease renewals (Metadata)
			fmt.Fprintf(&b, `%s"level":"Metadata","stage":"ResponseComplete","requestURI":"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-%d?timeout=10s","verb":"update","user":{"username":"system:node:node-%d","groups":["system:nodes","system:authenticated"]},"sourceIPs":["10.0.1.%d"],"userAgent":"kubelet/v1.36.3 (linux/amd64) kubernetes/2f1c8a7","objectRef":{"resource":"leases","namespace":"kube-node-lease","name":"node-%d","apiGroup":"coordination.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},%s}`,
				head, i, i, i%250, i, times)
		case 6, 7, 8, 9, 11: // reads and watches
			verb := []string{"get", "list", "watch"}[i%3]
			fmt.Fprintf(&b, `%s"level":"Metadata","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/%s/pods?limit=500&resourceVersion=0","verb":"%s","user":{"username":"system:serviceaccount:monitoring:prometheus","groups":["system:serviceaccounts","system:authenticated"]},"sourceIPs":["10.0.2.3"],"userAgent":"prometheus/v3.1.0","objectRef":{"resource":"pods","namespace":"%s","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},%s}`,
				head, ns, verb, ns, times)
		case 12, 13: // events created by controllers
			fmt.Fprintf(&b, `%s"level":"Metadata","stage":"ResponseComplete","requestURI":"/apis/events.k8s.io/v1/namespaces/%s/events","verb":"create","user":{"username":"system:serviceaccount:kube-system:deployment-controller","groups":["system:serviceaccounts","system:authenticated"]},"userAgent":"kube-controller-manager/v1.36.3","objectRef":{"resource":"events","namespace":"%s","apiGroup":"events.k8s.io","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":201},%s}`,
				head, ns, ns, times)
		case 14, 16: // status updates
			fmt.Fprintf(&b, `%s"level":"Request","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/%s/deployments/web/status","verb":"update","user":{"username":"system:serviceaccount:kube-system:deployment-controller","groups":["system:authenticated"]},"userAgent":"kube-controller-manager/v1.36.3","objectRef":{"resource":"deployments","namespace":"%s","name":"web","apiGroup":"apps","apiVersion":"v1","subresource":"status"},"responseStatus":{"metadata":{},"code":200},"requestObject":{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"%s"},"status":{"replicas":4,"readyReplicas":4}},%s}`,
				head, ns, ns, ns, times)
		default: // RequestReceived stage of a write
			fmt.Fprintf(&b, `%s"level":"Request","stage":"RequestReceived","requestURI":"/api/v1/namespaces/%s/configmaps/settings","verb":"patch",%s,"objectRef":{"resource":"configmaps","namespace":"%s","name":"settings","apiVersion":"v1"},"requestReceivedTimestamp":"2026-11-20T10:00:01.000000Z","stageTimestamp":"2026-11-20T10:00:01.000000Z"}`,
				head, ns, user, ns)
		}
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func TestAuditBatchShape(t *testing.T) {
	b, err := DecodeK8sAudit(auditBatch(100, 1))
	if err != nil {
		t.Fatal(err)
	}
	ignored := 0
	for _, n := range b.Ignored {
		ignored += n
	}
	if len(b.EventIDs) != 15 || ignored != 85 || len(b.Observations) != 20 {
		t.Errorf("batch of 100: %d relevant events, %d observations, %d ignored (%s)", len(b.EventIDs), len(b.Observations), ignored, ignoredString(b.Ignored))
	}
}

// BenchmarkIngestAudit measures one core parsing, filtering and deduplicating audit EventList
// batches of 100 events; events/s is the figure reported in docs/events.md.
func BenchmarkIngestAudit(b *testing.B) {
	const perBatch, batches = 100, 64
	bodies := make([][]byte, batches)
	size := 0
	for i := range bodies {
		bodies[i] = auditBatch(perBatch, i)
		size += len(bodies[i])
	}
	d := NewDeduper(1 << 16)
	b.SetBytes(int64(size / batches))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		batch, err := DecodeK8sAudit(bodies[i%batches])
		if err != nil {
			b.Fatal(err)
		}
		d.Filter(batch)
	}
	b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkDecodeAdmissionReview is one review's decoding as the admission webhook does it on
// every covered write (issue 37): each of the recorded reviews in testdata/admission per op.
func BenchmarkDecodeAdmissionReview(b *testing.B) {
	bodies := admissionBodies(b)
	b.ReportAllocs()
	for b.Loop() {
		for _, body := range bodies {
			if _, err := DecodeAdmissionReview(body, admissionAt); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// admissionBodies reads the recorded reviews of testdata/admission, as the API server sent them.
func admissionBodies(tb testing.TB) [][]byte {
	paths, _ := filepath.Glob(filepath.Join("testdata", "admission", "*.json"))
	var bodies [][]byte
	for _, p := range paths {
		body, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		bodies = append(bodies, body)
	}
	if len(bodies) == 0 {
		tb.Fatal("no reviews in testdata/admission")
	}
	return bodies
}
