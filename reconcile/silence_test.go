package reconcile

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy/arbiter"
	"github.com/parleyhq/parley/reconcile/events"
)

// TestLiveDoorsDeclaringNeverBeatsSilence is issue 33's attack at the drift loop's doors: during
// the demo's peak-sales freeze, a cluster user no actor names raises prod/web's CPU request, and
// an identity no actor names proposes the same change, each declaring intent availability (the
// intent the freeze admits, outranking Git's performance claim). Neither declaration is counted:
// the audit event's change is deferred and Git's value enforced, and the proposal is refused,
// exactly as the same change declaring nothing.
func TestLiveDoorsDeclaringNeverBeatsSilence(t *testing.T) {
	cpu := core.K8sField("apps", "Deployment", "prod", "web", "/spec/template/spec/containers/0/resources/requests/cpu")
	freeze := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	// kubectl edit: an update of the whole object, as Git has it but for the CPU request.
	edit := func(id, annotations, cpuValue string) []byte {
		at := freeze.Format("2006-01-02T15:04:05.000000Z07:00")
		return auditList(fmt.Sprintf(`{"level":"Request","auditID":%q,"stage":"ResponseComplete",
"requestURI":"/apis/apps/v1/namespaces/prod/deployments/web","verb":"update","user":{"username":"mallory"},
"userAgent":"kubectl/v1.36.0 (linux/amd64) kubernetes/abc",
"objectRef":{"resource":"deployments","namespace":"prod","name":"web","apiGroup":"apps","apiVersion":"v1"},
"responseStatus":{"metadata":{},"code":200},
"requestObject":{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","namespace":"prod","labels":{"app":"web"},"annotations":{%s}},
  "spec":{"replicas":8,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web",
  "image":"registry.example.com/shop/web:1.41.3","ports":[{"containerPort":8080}],
  "resources":{"requests":{"cpu":%q,"memory":"768Mi"},"limits":{"memory":"1Gi"}}}]}}}},
"requestReceivedTimestamp":%q,"stageTimestamp":%q}`, id, annotations, cpuValue, at, at))
	}
	for _, tc := range []struct {
		name, annotations string
		intent            core.Intent
	}{
		{"declared", `"parley.dev/intent":"availability"`, core.IntentAvailability},
		{"silent", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.now = freeze
			r := only(t, e.ingest(events.SourceK8sAudit, edit("audit-"+tc.name, tc.annotations, "1500m")), cpu)
			v := r.Verdict
			if v.Decision != core.DecisionEnforceGit || v.Rule != "freeze.peak-sales" || v.Winner == nil || v.Winner.Value.String() != `"750m"` {
				t.Errorf("audit: a stranger's CPU raise during the freeze is not deferred:\n%s", arbiter.Explain(v))
			}
			if notCounted := strings.Contains(arbiter.Explain(v), "declares intent availability, which is not one an unknown actor may declare"); notCounted != (tc.intent != "") {
				t.Errorf("audit: the explanation says the declaration was not counted: %v\n%s", notCounted, arbiter.Explain(v))
			}

			c := core.Claim{Field: cpu, Actor: core.Actor{Identity: core.Identity{Source: core.SourceKubeUser, ID: "mallory"}},
				Value: core.StringValue("2000m"), Intent: tc.intent}
			got, err := e.rec.Propose(context.Background(), e.snapshot(), "p-"+tc.name, []core.Claim{c})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Accepted || got[0].Verdict.Rule != "freeze.peak-sales" {
				t.Fatalf("proposal: a stranger's CPU raise during the freeze is accepted: %+v\n%s", got, arbiter.Explain(got[0].Verdict))
			}
		})
	}
}
