package events

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"text/template"

	"go.yaml.in/yaml/v3"
)

// TestShippedArgoCDTemplate renders the notification templates shipped in the chart the way Argo CD
// does (Go text/template over .app, with toJson) and decodes the result: the template and the
// decoder must agree.
func TestShippedArgoCDTemplate(t *testing.T) {
	raw, err := os.ReadFile("../../charts/parley/argocd-notifications.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(raw, &cm); err != nil {
		t.Fatal(err)
	}
	var app map[string]any
	if err := json.Unmarshal(readTestdata(t, "argocd", "application.json"), &app); err != nil {
		t.Fatal(err)
	}
	funcs := template.FuncMap{"toJson": func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(b)
	}}
	for _, c := range []struct{ key, want string }{
		{"template.parley-out-of-sync", `k8s:apps/Deployment/prod/web%20"blue" OutOfSync in argocd/web @8e3f1b6c0b9f3f0a6d3c2e1f4a5b6c7d8e9f0a1b health=Healthy`},
		{"template.parley-sync-succeeded", `k8s:apps/Deployment/prod/web%20"blue" configured @8e3f1b6c0b9f3f0a6d3c2e1f4a5b6c7d8e9f0a1b by argocd-application-controller`},
	} {
		var tpl struct {
			Webhook map[string]struct {
				Method, Path, Body string
			} `yaml:"webhook"`
		}
		if err := yaml.Unmarshal([]byte(cm.Data[c.key]), &tpl); err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
		hook, ok := tpl.Webhook["parley"]
		if !ok || hook.Method != "POST" || hook.Path != "/events/argocd" {
			t.Fatalf("%s: webhook %+v", c.key, tpl.Webhook)
		}
		tm, err := template.New(c.key).Funcs(funcs).Parse(hook.Body)
		if err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
		var body bytes.Buffer
		if err := tm.Execute(&body, map[string]any{"app": app}); err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
		b, err := DecodeArgoCD(body.Bytes())
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.key, err, body.String())
		}
		if got := revertLines(b); len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: got %s, want %s", c.key, strings.Join(got, "; "), c.want)
		}
		// The Application's repoURL rides along, so a server serving many repositories can
		// judge the notification in the one the Application reads.
		o, err := OriginOf(SourceArgoCD, body.Bytes())
		if err != nil || len(o.RepoURLs) != 1 || o.RepoURLs[0] != "https://github.com/acme/deploy.git" {
			t.Errorf("%s: origin %+v, %v", c.key, o, err)
		}
	}
	for _, trig := range []string{"trigger.parley-on-out-of-sync", "trigger.parley-on-sync-succeeded"} {
		if !strings.Contains(cm.Data[trig], "when:") {
			t.Errorf("%s missing or has no condition", trig)
		}
	}
	if !strings.Contains(cm.Data["trigger.parley-on-out-of-sync"], "app.status.sync.status == 'OutOfSync'") {
		t.Errorf("the out-of-sync trigger does not test the sync status")
	}
}
