package arbiter

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
)

// FuzzDecide builds claims from the fuzzer's bytes and checks that the arbiter does not panic,
// explains every verdict, and decides the same whatever the order of the live claims.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, int64(0))
	f.Add([]byte{3, 3, 3, 200, 17, 90, 4, 4, 4, 4, 4, 4}, int64(3600))
	f.Add([]byte{1, 0, 0, 0, 2, 1, 1, 1, 5, 6, 6, 6, 6, 6, 6, 6, 6}, int64(-7200))
	f.Add([]byte("incident vs launch vs budget"), int64(86400*5))
	// The demo policy, and the same with the HPA giving replicas way to incident and critical claims.
	policies := []*policy.Policy{demoPolicy(f), giveWayDemo(f)}
	f.Fuzz(func(t *testing.T, data []byte, offset int64) {
		in := fuzzInput(t, data, offset)
		for _, p := range policies {
			want := Decide(p, in)
			if len(want.Explanation) == 0 {
				t.Fatal("empty explanation")
			}
			_ = Explain(want)
			if _, err := json.Marshal(want); err != nil {
				t.Fatalf("verdict does not encode: %v", err)
			}
			for _, order := range []func([]core.Claim){
				slices.Reverse[[]core.Claim],
				func(cs []core.Claim) {
					if len(cs) > 1 {
						cs[0], cs[len(cs)-1] = cs[len(cs)-1], cs[0]
					}
				},
			} {
				live := slices.Clone(in.Live)
				order(live)
				in2 := in
				in2.Live = live
				if got := Decide(p, in2); !reflect.DeepEqual(got, want) {
					t.Fatalf("%s: order changes the verdict:\n%s\nvs\n%s", p.File, Explain(want), Explain(got))
				}
			}
		}
	})
}

// fuzzInput reads claims from bytes: each claim takes 4 bytes (actor, value, intent+motivation,
// time and expiry); the first byte picks the field and whether Git holds it.
func fuzzInput(t *testing.T, data []byte, offset int64) Input {
	if len(data) == 0 {
		return Input{Field: settings, Now: t0}
	}
	f := randomFields[int(data[0])%len(randomFields)]
	now := t0.Add(time.Duration(offset%(86400*30)) * time.Second)
	in := Input{Field: f, Now: now, Lookup: GitValues{
		capacity.Object().Child("min_size"): mustValue(t, 2),
		capacity.Object().Child("max_size"): mustValue(t, 16),
		core.K8sField("autoscaling", "HorizontalPodAutoscaler", "prod", "web", "/spec/scaleTargetRef/name"): core.StringValue("web"),
	}}
	if data[0]&0x80 == 0 {
		g := claimBy(f, core.SourceGitAuthor, "carol@parley.example", mustValue(t, 4), t0.Add(-24*time.Hour))
		in.Git = &g
	}
	intents := []core.Intent{"", "availability", "cost", "security", "performance", "nonsense"}
	motivations := []string{"", "incident", "cve", "budget", "traffic", "launch", "unknown"}
	for i := 1; i+3 < len(data) && len(in.Live) < 8; i += 4 {
		b := data[i : i+4]
		c := claimBy(f, core.SourceGitAuthor, "", mustValue(t, int(b[1])%24), t0.Add(-time.Duration(b[3])*time.Minute))
		c.Actor.Identity = randomActors[int(b[0])%len(randomActors)]
		c.Intent = intents[int(b[2])%len(intents)]
		if m := motivations[int(b[2]>>3)%len(motivations)]; m != "" {
			c.Motivation = core.Motivation{Kind: m, Severity: []core.Severity{"", "critical", "low"}[int(b[0]>>4)%3]}
		}
		if b[1]&0x80 != 0 {
			c.Expires = c.At.Add(time.Duration(b[2]) * time.Minute)
		}
		if b[0]&0x40 != 0 {
			c.Yield, c.Value = true, core.Value{}
		}
		in.Live = append(in.Live, c)
		if b[3]&1 == 0 {
			in.History = append(in.History, c)
		}
	}
	return in
}

// FuzzReadClaims checks the claims-file parser never panics and names what is wrong.
func FuzzReadClaims(f *testing.F) {
	f.Add(`{"at": "2026-11-22T10:00:00Z", "git": [{"field": "k8s:apps/Deployment/prod/web#/spec/replicas", "actor": {"source": "git-author", "id": "a@b"}, "value": 3}]}`)
	f.Add(`{"live": [{"field": "tf:infra//aws_autoscaling_group.a#/desired_capacity", "actor": {"source": "aws-principal", "id": "arn:x"}, "value": 20, "expires": "1h", "motivation": {"kind": "incident", "severity": "high"}}]}`)
	f.Add(`{"git_values": {"tf:a//b.c#/max_size": 16}}`)
	f.Add(`{"live": [{"field": "k8s:apps/Deployment/prod/web#/spec/replicas", "actor": {"source": "k8s-user", "id": "x"}, "yield": true}]}`)
	f.Fuzz(func(t *testing.T, src string) {
		cs, err := ReadClaims(strings.NewReader(src))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "claims file") {
				t.Fatalf("error does not say where: %v", err)
			}
			return
		}
		for _, fld := range cs.Fields() {
			_ = cs.Input(fld, t0)
		}
	})
}

// FuzzReadEvents checks the event-stream parser never panics, reports line numbers, and that what
// it accepts replays without error.
func FuzzReadEvents(f *testing.F) {
	f.Add(`{"kind":"git","at":"2026-11-22T09:00:00Z","field":"k8s:apps/Deployment/prod/web#/spec/replicas","actor":{"source":"git-author","id":"a@b"},"value":3}
{"kind":"claim","at":"2026-11-22T10:00:00Z","field":"k8s:apps/Deployment/prod/web#/spec/replicas","actor":{"source":"k8s-user","id":"system:serviceaccount:kube-system:horizontal-pod-autoscaler"},"value":8,"expires":"1h"}
{"kind":"tick","at":"2026-11-22T12:00:00Z"}`)
	f.Add(`{"kind":"git-value","at":"2026-11-22T09:00:00Z","field":"tf:infra/kafka//aws_autoscaling_group.consumer#/max_size","value":16}`)
	f.Add("# comment\n\n{\"kind\":\"tick\",\"at\":\"2026-11-22T09:00:00Z\"}")
	p := demoPolicy(f)
	f.Fuzz(func(t *testing.T, src string) {
		evs, err := ReadEvents(strings.NewReader(src))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "events line ") {
				t.Fatalf("error does not name the line: %v", err)
			}
			return
		}
		if len(evs) > 50 {
			return
		}
		if _, err := Simulate(p, evs); err != nil {
			t.Fatalf("accepted events do not replay: %v", err)
		}
	})
}
