package realk8s

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/reconcile/events"
)

var chartDir = filepath.Join("..", "..", "charts", "parley")

// TestShippedAuditPolicy starts the real kube-apiserver with charts/parley/kube-audit-policy.yaml
// (the apiserver refuses to start on a policy it cannot read) and shows both halves of it: an
// HPA's scale of a Deployment reaches Parley as an observation it attributes to the HPA, while a
// Secret's contents and reads never leave the apiserver.
func TestShippedAuditPolicy(t *testing.T) {
	bins := cachedBinaries(t)
	bins.require(t, bins.etcd, bins.apiserver)
	policy, err := os.ReadFile(filepath.Join(chartDir, "kube-audit-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	c := startClusterWithPolicy(t, bins, string(policy))
	kube, err := kubernetes.NewForConfig(c.config(adminToken, "parley-realk8s-test"))
	if err != nil {
		t.Fatal(err)
	}
	hpa, err := kubernetes.NewForConfig(c.config(hpaToken, hpaUserAgent))
	if err != nil {
		t.Fatal(err)
	}

	canary := make([]byte, 16)
	rand.Read(canary)
	secretValue := "parley-canary-" + hex.EncodeToString(canary)
	if _, err := kube.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-password"},
		StringData: map[string]string{"password": secretValue}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Secrets("default").Get(ctx, "db-password", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	three := int32(3)
	labels := map[string]string{"app": "web"}
	if _, err := kube.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &three, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scaleAsHPA(t, ctx, hpa, "web", 7)

	field := core.K8sField("apps", "Deployment", "default", "web", "/spec/replicas")
	var seen []events.Observation
	waitFor(t, 30*time.Second, "an audit observation of "+field.String()+" = 7", func() (bool, error) {
		seen = seen[:0]
		for i, body := range c.audit.all() {
			b, err := events.DecodeK8sAudit(body)
			if err != nil {
				return false, fmt.Errorf("decode audit body %d: %w", i, err)
			}
			for _, o := range b.Observations {
				if o.Field == field && o.Value.JSON() == "7" {
					seen = append(seen, o)
				}
			}
		}
		if len(seen) == 0 {
			return false, notYet("%d audit bodies, no such observation", len(c.audit.all()))
		}
		return true, nil
	})
	for _, o := range seen {
		if o.Identity.ID != hpaUser {
			t.Errorf("observation %s = 7 (event %s) is %q's, want the HPA's %q", o.Field, o.EventID, o.Identity.ID, hpaUser)
		}
	}

	// The webhook backend sends events in order: the Secret's create and get came before the scale.
	for i, body := range c.audit.all() {
		if bytes.Contains(body, []byte(secretValue)) || bytes.Contains(body, []byte("db-password")) {
			t.Errorf("audit body %d carries the Secret:\n%s", i, body)
		}
		var list struct {
			Items []struct {
				Verb      string
				ObjectRef *struct{ Resource string }
			}
		}
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatalf("audit body %d: %v", i, err)
		}
		for _, e := range list.Items {
			if e.Verb == "get" || e.Verb == "list" || e.Verb == "watch" || (e.ObjectRef != nil && e.ObjectRef.Resource == "secrets") {
				t.Errorf("audit body %d has a %s of %+v: the policy sends no reads and no Secrets", i, e.Verb, e.ObjectRef)
			}
		}
	}
}
