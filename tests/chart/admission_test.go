package chart

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// admissionValues turns the webhook on for cluster prod.
func admissionValues(extra map[string]any) map[string]any {
	a := map[string]any{"enabled": true, "cluster": "prod"}
	for k, v := range extra {
		a[k] = v
	}
	return map[string]any{
		"github":    map[string]any{"appID": 12345},
		"gitops":    map[string]any{"clusters": map[string]any{"prod": map[string]any{"repository": "acme/infra"}}},
		"admission": a,
	}
}

type webhookConfig struct {
	Kind     string
	Metadata struct{ Annotations map[string]string }
	Webhooks []struct {
		Name                    string
		AdmissionReviewVersions []string `json:"admissionReviewVersions"`
		SideEffects             string   `json:"sideEffects"`
		FailurePolicy           string   `json:"failurePolicy"`
		TimeoutSeconds          int      `json:"timeoutSeconds"`
		ClientConfig            struct {
			Service  struct{ Name, Namespace, Path string }
			CABundle string `json:"caBundle"`
		} `json:"clientConfig"`
		Rules []struct {
			Resources  []string
			Operations []string
		}
		NamespaceSelector struct {
			MatchExpressions []struct {
				Key, Operator string
				Values        []string
			} `json:"matchExpressions"`
		} `json:"namespaceSelector"`
	}
}

// docs splits a rendered template into its YAML documents, by kind.
func docs(t *testing.T, s string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range strings.Split(s, "\n---\n") {
		var k struct{ Kind string }
		if err := yaml.Unmarshal([]byte(d), &k); err != nil {
			t.Fatalf("%v in:\n%s", err, d)
		}
		if k.Kind != "" {
			out[k.Kind] = d
		}
	}
	return out
}

// TestRenderAdmissionWebhook: the webhook fails open with a short timeout, leaves kube-system and
// Parley's own namespace alone, declares dry runs side-effect free, calls /admission/<cluster> on
// the Service, and trusts a CA that signed the certificate the pod serves for the Service's name.
func TestRenderAdmissionWebhook(t *testing.T) {
	out, err := render(t, admissionValues(nil))
	if err != nil {
		t.Fatal(err)
	}
	d := docs(t, out["parley/templates/admission.yaml"])
	var vwc webhookConfig
	if err := yaml.Unmarshal([]byte(d["ValidatingWebhookConfiguration"]), &vwc); err != nil || len(vwc.Webhooks) != 1 {
		t.Fatalf("webhook configuration: %v\n%s", err, d["ValidatingWebhookConfiguration"])
	}
	w := vwc.Webhooks[0]
	if w.FailurePolicy != "Ignore" || w.TimeoutSeconds != 5 || w.SideEffects != "NoneOnDryRun" || len(w.AdmissionReviewVersions) != 1 ||
		w.ClientConfig.Service.Path != "/admission/prod" || w.ClientConfig.Service.Name != "parley" || w.ClientConfig.Service.Namespace != "parley" {
		t.Fatalf("webhook: %+v", w)
	}
	ex := w.NamespaceSelector.MatchExpressions
	if len(ex) != 1 || ex[0].Key != "kubernetes.io/metadata.name" || ex[0].Operator != "NotIn" || strings.Join(ex[0].Values, ",") != "kube-system,parley" {
		t.Fatalf("namespace selector: %+v", ex)
	}
	if !strings.Contains(strings.Join(w.Rules[0].Resources, ","), "deployments/scale") {
		t.Fatalf("rules: %+v", w.Rules)
	}

	// The generated certificate verifies against the caBundle for the Service's DNS name.
	var sec struct{ Data map[string]string }
	if err := yaml.Unmarshal([]byte(d["Secret"]), &sec); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	ca, _ := base64.StdEncoding.DecodeString(w.ClientConfig.CABundle)
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("caBundle holds no certificate")
	}
	crt, _ := base64.StdEncoding.DecodeString(sec.Data["tls.crt"])
	blk, _ := pem.Decode(crt)
	if blk == nil {
		t.Fatal("tls.crt holds no PEM")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "parley.parley.svc"}); err != nil {
		t.Fatalf("the served certificate does not verify against the caBundle: %v", err)
	}

	// parley serve reads the admission block from the ConfigMap, listening with that certificate.
	hcl := d["ConfigMap"]
	for _, want := range []string{`admission_listen        = ":8443"`, `admission "prod" {`, `mode = "warn"`, `authentication = "none"`,
		`admission_tls_cert_file = "/etc/parley/admission-tls/tls.crt"`} {
		if !strings.Contains(hcl, want) {
			t.Errorf("config lacks %s:\n%s", want, hcl)
		}
	}
	dep := out["parley/templates/deployment.yaml"]
	for _, want := range []string{`"--config", "/etc/parley/admission/parley.hcl"`, "secretName: parley-admission-tls", "containerPort: 8443"} {
		if !strings.Contains(dep, want) {
			t.Errorf("deployment lacks %s", want)
		}
	}
	if !strings.Contains(out["parley/templates/service.yaml"], "port: 443, targetPort: admission") {
		t.Errorf("service lacks the admission port")
	}
}

func TestRenderAdmissionWithCertManagerAndToken(t *testing.T) {
	out, err := render(t, admissionValues(map[string]any{"certManager": true, "mode": "deny", "observe": true,
		"tokenSecret": map[string]any{"name": "apiserver-token", "key": "token"}}))
	if err != nil {
		t.Fatal(err)
	}
	d := docs(t, out["parley/templates/admission.yaml"])
	if d["Certificate"] == "" || d["Issuer"] == "" || d["Secret"] != "" {
		t.Fatalf("want cert-manager's Certificate and Issuer and no generated Secret: %v", out["parley/templates/admission.yaml"])
	}
	var vwc webhookConfig
	yaml.Unmarshal([]byte(d["ValidatingWebhookConfiguration"]), &vwc)
	if vwc.Metadata.Annotations["cert-manager.io/inject-ca-from"] != "parley/parley-admission" || vwc.Webhooks[0].ClientConfig.CABundle != "" {
		t.Fatalf("cainjector annotation: %+v", vwc)
	}
	if hcl := d["ConfigMap"]; !strings.Contains(hcl, `token_file = "/etc/parley/admission-token/token"`) || !strings.Contains(hcl, `mode = "deny"`) ||
		strings.Contains(hcl, "authentication") || !strings.Contains(hcl, "observe = true") {
		t.Fatalf("config:\n%s", hcl)
	}
	if !strings.Contains(out["parley/templates/deployment.yaml"], `secretName: "apiserver-token"`) {
		t.Fatalf("the token Secret is not mounted")
	}
}

func TestRenderAdmissionRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		extra map[string]any
		want  string
	}{
		{map[string]any{"cluster": ""}, "admission.cluster is required"},
		{map[string]any{"cluster": "staging"}, `admission.cluster "staging": add it to gitops.clusters`},
		{map[string]any{"mode": "block"}, `admission.mode "block": want warn or deny`},
		{map[string]any{"timeoutSeconds": 60}, "admission.timeoutSeconds: want 1 to 30"},
	} {
		if _, err := render(t, admissionValues(tc.extra)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.extra, err, tc.want)
		}
	}
}
