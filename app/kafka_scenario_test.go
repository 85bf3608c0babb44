package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/fakegithub"
	"github.com/parleyhq/parley/internal/gittest"
	"github.com/parleyhq/parley/policy/arbiter"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/store"
)

// TestKafkaScenarioEndToEnd is docs/agents.md's Kafka scenario through parley serve's handlers: the
// scaling agent asks over HTTP (POST /v1/proposals, its token mapped to its IAM role), its changes
// arrive as CloudTrail events through the drift handler, and the verdicts land in the GitOps
// repository. The repository's policy holds the agent to asking first.
func TestKafkaScenarioEndToEnd(t *testing.T) {
	srv, _, d, token, gh := proposalsSetupGH(t)
	ctx := context.Background()
	remote := gittest.New(t, mustRemoteDir(t, d))
	work := filepath.Join(t.TempDir(), "work")
	remote.Run("clone", "-q", remote.Dir, work)
	w := gittest.New(t, work)
	pol := filepath.Join(work, ".parley/policy.hcl")
	src, _ := os.ReadFile(pol)
	// The veto layer is a writer of the field too: it puts back what it does not allow.
	src = []byte(strings.Replace(string(src), `writers = ["kafka-agent", "oncall", "cost-optimizer"]`, `writers = ["kafka-agent", "oncall", "cost-optimizer", "capacity-guard"]`, 1))
	os.WriteFile(pol, append(src, []byte(`
actor "capacity-guard" {
  description    = "The veto layer between agents and the cloud API"
  intent         = "reliability"
  aws_principals = ["arn:aws:sts::*:assumed-role/capacity-guard/*", "arn:aws:iam::*:role/capacity-guard"]
}

rule "agents-ask-first" {
  description = "The Kafka agent asks before it scales"
  when        = claim.actor == "kafka-agent" && !claim.asked
  decision    = "veto"
}
`)...), 0o644)
	w.Run("commit", "-q", "-am", "Agents ask first\n\nIntent: compliance\nMotivation: audit\n")
	w.Run("push", "-q", "origin", "HEAD:main")
	f, _ := core.ParseField(capacityField)

	// 1. 24 is over max_size: vetoed, with the bound explained, before anything changes.
	code, _, body := propose(t, srv, token, `{"claims":[{"field":"`+capacityField+`","value":24,"intent":"performance"}]}`)
	var resp ProposalResponse
	if json.Unmarshal(body, &resp); code != 200 || resp.Refused != 1 || !strings.Contains(resp.Verdicts[0].Explanation, "above the maximum 16") {
		t.Fatalf("24: %d %s", code, body)
	}
	// 2. 12 during an incident, for 4 hours: accepted until its expiry.
	code, _, body = propose(t, srv, token, `{"claims":[{"field":"`+capacityField+`","value":12,"intent":"performance","motivation":{"kind":"incident","ref":"INC-4211"},"expires":"4h"}]}`)
	if json.Unmarshal(body, &resp); code != 200 || resp.Accepted != 1 || resp.Verdicts[0].Until == "" {
		t.Fatalf("12: %d %s", code, body)
	}
	proposal := resp.Proposal

	// 3. The agent scales to 12: the CloudTrail event is the claimed change, and its yield is
	// gated in Terraform so the next apply keeps it.
	before := remote.Run("rev-parse", "main")
	if err := d.Handle(ctx, cloudTrailDelivery(t, "ct-asked", 12, d.now().Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	if got := remote.Run("log", "--format=%s", before+"..main"); got != "parley: yield desired_capacity of aws_autoscaling_group.consumer to kafka-agent" {
		t.Fatalf("after the asked-for change:\n%s", got)
	}
	if tf := remote.Run("show", "main:infra/kafka/main.tf"); !strings.Contains(tf, "ignore_changes") {
		t.Fatalf("no ignore_changes gate:\n%s", tf)
	}
	rd, _ := d.repo(ctx, "acme/infra", "")
	recs, _ := rd.state.Verdicts(ctx, f)
	if last := recs[len(recs)-1]; !strings.Contains(last.Note, "the change proposal "+proposal+" asked for") || !slices.Contains(last.Evidence, "proposal/"+proposal) {
		t.Fatalf("the verdict does not cite the proposal: %+v", last)
	}

	// 4. It scales to 14 without asking: judged from CloudTrail as an unasked change, vetoed.
	if err := d.Handle(ctx, cloudTrailDelivery(t, "ct-unasked", 14, d.now().Add(2*time.Minute))); err != nil {
		t.Fatal(err)
	}
	recs, _ = rd.state.Verdicts(ctx, f)
	last := recs[len(recs)-1]
	if last.Verdict.Decision != core.DecisionVeto || !strings.Contains(fmt.Sprint(last.Verdict.Explanation), "agents-ask-first") {
		t.Fatalf("the unasked change: %s (%s) %+v", last.Verdict.Decision, last.Verdict.Rule, last.Verdict.Explanation)
	}

	// 5. A veto layer puts 12 back and the agent raises it again, and again: the field flips between
	// them, so it is held, and the hold is put to the people the policy asks on a pull request.
	before = remote.Run("rev-parse", "main")
	clock := d.now().Add(2 * time.Minute)
	d.Now = func() time.Time { return clock } // the flips arrive as they happen, a minute apart
	for i, flip := range []struct {
		role     string
		capacity int
	}{{guardRole, 12}, {"kafka-scaling-agent", 14}, {guardRole, 12}, {"kafka-scaling-agent", 14}} {
		clock = clock.Add(time.Minute)
		if err := d.Handle(ctx, cloudTrailDeliveryBy(t, flip.role, fmt.Sprintf("ct-flip-%d", i), flip.capacity, clock)); err != nil {
			t.Fatal(err)
		}
	}
	last, _, _ = rd.state.Last(ctx, f)
	if last.Verdict.Decision != core.DecisionHold || last.Verdict.Rule != "oscillation" || last.PR == 0 {
		t.Fatalf("the flips: %s (%s) on pull request %d: %s\n%s", last.Verdict.Decision, last.Verdict.Rule, last.PR, last.Note, arbiter.Explain(last.Verdict))
	}
	// Before the hold the guard's value could be adopted; the hold itself writes nothing to main.
	if log := remote.Run("log", "--format=%s", before+"..main"); strings.Contains(log, "hold") {
		t.Fatalf("the hold wrote to main:\n%s", log)
	}
	if files := remote.Run("diff", "--name-only", "main", last.Branch); last.Branch == "main" || files != "" {
		t.Fatalf("the hold's branch %s changes files: %s", last.Branch, files)
	}
	var opened []fakegithub.Write
	for _, w := range gh.Writes() {
		if w.Operation == "pulls/create" {
			opened = append(opened, w)
		}
	}
	if len(opened) != 1 {
		t.Fatalf("pull requests opened: %d, want the hold's one", len(opened))
	}
	title, _ := opened[0].Body["title"].(string)
	prBody, _ := opened[0].Body["body"].(string)
	if title != "parley: hold desired_capacity of aws_autoscaling_group.consumer: people decide" ||
		!strings.Contains(prBody, "@parleyhq/sre: you are asked to decide") || !strings.Contains(prBody, "capacity-guard") {
		t.Fatalf("the hold's pull request: %q\n%s", title, prBody)
	}
}

// mustRemoteDir is the bare repository the fake GitHub serves as acme/infra.
func mustRemoteDir(t *testing.T, d *Drift) string {
	t.Helper()
	tgt, err := d.resolve(context.Background(), "acme/infra", "")
	if err != nil {
		t.Fatal(err)
	}
	return tgt.cloneURL
}

// cloudTrailDelivery is the scaling agent's SetDesiredCapacity call as EventBridge delivers it.
func cloudTrailDelivery(t *testing.T, id string, capacity int, at time.Time) store.Delivery {
	t.Helper()
	return cloudTrailDeliveryBy(t, "kafka-scaling-agent", id, capacity, at)
}

// guardRole is the veto layer's IAM role: it puts back what it does not allow.
const guardRole = "capacity-guard"

// cloudTrailDeliveryBy is a SetDesiredCapacity call by a session of the IAM role named role.
func cloudTrailDeliveryBy(t *testing.T, role, id string, capacity int, at time.Time) store.Delivery {
	t.Helper()
	body := fmt.Sprintf(`{"version":"0","id":%[1]q,"detail-type":"AWS API Call via CloudTrail","source":"aws.autoscaling","account":"123456789012","time":%[2]q,"region":"eu-west-1","resources":[],
"detail":{"eventVersion":"1.09","userIdentity":{"type":"AssumedRole","principalId":"AROAEXAMPLEAGENT:session-1","arn":"arn:aws:sts::123456789012:assumed-role/%[3]s/session-1","accountId":"123456789012",
"sessionContext":{"sessionIssuer":{"type":"Role","principalId":"AROAEXAMPLEAGENT","arn":"arn:aws:iam::123456789012:role/%[3]s","accountId":"123456789012","userName":%[3]q}}},
"eventTime":%[2]q,"eventSource":"autoscaling.amazonaws.com","eventName":"SetDesiredCapacity","awsRegion":"eu-west-1","sourceIPAddress":"10.0.3.7","userAgent":"Boto3/1.35.20",
"requestParameters":{"autoScalingGroupName":"kafka-consumer","desiredCapacity":%[4]d,"honorCooldown":false},"responseElements":null,"eventID":%[1]q,"readOnly":false,"eventType":"AwsApiCall","recipientAccountId":"123456789012"}}`,
		id, at.UTC().Format(time.RFC3339), role, capacity)
	return store.Delivery{Source: store.SourceCloudTrail, ID: id, Event: webhooks.EventName, Body: []byte(body), ReceivedAt: at}
}
