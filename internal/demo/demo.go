package demo

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

//go:embed policy.hcl
var policyHCL string

// Policy returns the demo repository's policy (.parley/policy.hcl).
func Policy() string { return policyHCL }

// VetoAskPolicy returns the demo policy with the security team's admin role (the AWS console's
// SecurityAdmin, trusted to assert cve, its claims motivated by cve) and the IAM skeleton putting a
// veto to people when the vetoed claim is trusted for cve, asking @acme/security-leads. Tests of
// the veto put to people, in parley ingest and in the App, share it.
func VetoAskPolicy() string {
	s := strings.Replace(policyHCL, `asserted_by = ["scanner", "oncall"]`, `asserted_by = ["scanner", "oncall", "security-admin"]`, 1)
	return strings.Replace(s, "  immutable = true\n}", `  immutable = true
  # A veto of a trusted CVE fix is put to people: Parley proposes the value as a Git change.
  veto_ask_when = claim.motivation == "cve"
  veto_ask      = ["@acme/security-leads"]
}

actor "security-admin" {
  description    = "The security team's admin role in the AWS console"
  intent         = "security"
  motivation     = "cve"
  aws_principals = ["arn:aws:sts::*:assumed-role/SecurityAdmin/*", "arn:aws:iam::*:role/SecurityAdmin"]
}`, 1)
}

// Branch is the demo repository's default branch.
const Branch = "main"

// Result describes a built demo repository.
type Result struct {
	Dir     string // the work tree
	Branch  string // the default branch, checked out
	Head    string // the branch's tip commit
	Commits int    // commits written, on every branch
}

// The people and bots of the demo.
var (
	utc       = time.UTC
	berlin    = time.FixedZone("CET", 1*60*60)
	newYork   = time.FixedZone("EST", -5*60*60)
	dana      = person{Name: "Dana Okafor", Email: "dana@parley.example", Zone: berlin}   // platform engineer
	bob       = person{Name: "Bob Chen", Email: "bob@parley.example", Zone: newYork}      // application team, on call this week
	alice     = person{Name: "Alice Martin", Email: "alice@parley.example", Zone: berlin} // on-call engineer
	optimizer = person{Name: "Cost Optimizer", Email: "cost-optimizer@parley.example", Zone: utc}
	scanner   = person{Name: "Security Scanner", Email: "scanner@parley.example", Zone: utc}
	// Someone who wrote Alice's name and email on a commit without her key: the ledger shows the
	// commit as unverified, and it carries none of on-call's trust.
	forgedAlice = person{Name: alice.Name, Email: alice.Email, Zone: berlin, Unsigned: true}
)

func day(d, h, m int) time.Time { return time.Date(2026, time.November, d, h, m, 0, 0, time.UTC) }

// Build writes the demo repository into dir, which must not exist or be empty, checks out its
// default branch and returns what it built. Equal inputs give equal commits: times and authors are
// fixed.
func Build(dir string) (Result, error) {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return Result{}, fmt.Errorf("demo: %s is not empty", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return Result{}, fmt.Errorf("demo: %w", err)
	}
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(Branch)},
	})
	if err != nil {
		return Result{}, fmt.Errorf("demo: init %s: %w", dir, err)
	}
	h := &history{repo: repo}
	res := Result{Dir: dir, Branch: Branch}
	tip, err := writeStory(h, &res)
	if err != nil {
		return Result{}, fmt.Errorf("demo: %w", err)
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName(Branch), tip)); err != nil {
		return Result{}, fmt.Errorf("demo: set %s: %w", Branch, err)
	}
	// Record the identity of the repository's default author, so that a person exploring the demo
	// with git commit does not need a global configuration.
	cfg, err := repo.Config()
	if err == nil {
		cfg.User.Name, cfg.User.Email = "Demo User", "demo@parley.example"
		err = repo.SetConfig(cfg)
	}
	if err != nil {
		return Result{}, fmt.Errorf("demo: write config: %w", err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return Result{}, fmt.Errorf("demo: work tree: %w", err)
	}
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName(Branch), Force: true}); err != nil {
		return Result{}, fmt.Errorf("demo: check out %s: %w", Branch, err)
	}
	res.Head = tip.String()
	return res, nil
}

// step is one commit of the story on main.
type step struct {
	author person
	when   time.Time
	msg    string
	edits  [][3]string // file, old, new
	add    map[string]string
}

// writeStory writes the demo's history and returns main's tip.
func writeStory(h *history, res *Result) (plumbing.Hash, error) {
	files := map[string]string{}
	var tip plumbing.Hash
	apply := func(s step) error {
		next := files
		var err error
		if s.add != nil {
			next = map[string]string{}
			for k, v := range files {
				next[k] = v
			}
			for k, v := range s.add {
				next[k] = v
			}
		}
		for _, e := range s.edits {
			if next, err = edit(next, e[0], e[1], e[2]); err != nil {
				return err
			}
		}
		var parents []plumbing.Hash
		if !tip.IsZero() {
			parents = []plumbing.Hash{tip}
		}
		c, err := h.commit(next, parents, s.author, s.when, s.msg)
		if err != nil {
			return err
		}
		files, tip = next, c
		res.Commits++
		return nil
	}

	for _, s := range mainBefore {
		if err := apply(s); err != nil {
			return tip, err
		}
	}

	// Pull request #12: Bob raises the web requests on a branch; main moves on meanwhile; Dana merges
	// it with a merge commit (git merge --no-ff, GitHub's "Create a merge commit").
	base, baseFiles := tip, files
	prFiles, err := edit(baseFiles, webFile, "cpu: 500m\n              memory: 512Mi", "cpu: 750m\n              memory: 768Mi")
	if err != nil {
		return tip, err
	}
	prTip, err := h.commit(prFiles, []plumbing.Hash{base}, bob, day(3, 19, 20),
		"web: raise requests for holiday traffic\n\nLoad tests at 2x holiday traffic showed CPU throttling at 500m.\n\nIntent: performance\nMotivation: traffic\n")
	if err != nil {
		return tip, err
	}
	res.Commits++
	if err := h.repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName("bob/web-requests"), prTip)); err != nil {
		return tip, fmt.Errorf("set PR branch: %w", err)
	}
	if err := apply(mainDuringPR); err != nil {
		return tip, err
	}
	merged, err := edit(files, webFile, "cpu: 500m\n              memory: 512Mi", "cpu: 750m\n              memory: 768Mi")
	if err != nil {
		return tip, err
	}
	mergeCommit, err := h.commit(merged, []plumbing.Hash{tip, prTip}, dana, day(3, 21, 5),
		"Merge pull request #12 from bob/web-requests\n\nweb: raise requests for holiday traffic\n\nIntent: performance\nMotivation: traffic\n")
	if err != nil {
		return tip, err
	}
	files, tip = merged, mergeCommit
	res.Commits++

	for _, s := range mainAfter {
		if err := apply(s); err != nil {
			return tip, err
		}
	}
	// The policy travels with the repository, the way a team would keep it.
	if err := apply(step{author: dana, when: day(7, 10, 0),
		msg: "Add the Parley policy\n\nIntent: consistency\nMotivation: maintenance\n",
		add: map[string]string{".parley/policy.hcl": policyHCL}}); err != nil {
		return tip, err
	}
	// Flux applies k8s/prod: the object Parley writes per-field gates into when a live change wins.
	if err := apply(step{author: dana, when: day(7, 10, 30),
		msg: "Deliver k8s/prod with Flux\n\nIntent: consistency\nMotivation: maintenance\n",
		add: map[string]string{fluxFile: fluxYAML}}); err != nil {
		return tip, err
	}
	return tip, nil
}

const (
	webFile   = "k8s/prod/web.yaml"
	kafkaFile = "infra/kafka/main.tf"
	fluxFile  = "clusters/prod/apps.yaml"
)

// fluxYAML is the Flux Kustomization that applies k8s/prod from this repository.
const fluxYAML = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m
  # Everything under k8s/prod, applied with server-side apply as field manager kustomize-controller.
  path: ./k8s/prod
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
`

var mainBefore = []step{
	{
		author: dana, when: day(2, 9, 14),
		msg: "Add the web deployment and its autoscaler\n",
		add: map[string]string{webFile: webYAML},
	},
	{
		author: dana, when: day(2, 10, 2),
		msg: "Add the Kafka consumer group, its lag alarm and IAM role\n\nIntent: reliability\nMotivation: launch KAFKA-12\n",
		add: map[string]string{kafkaFile: kafkaTF},
	},
	{
		author: forgedAlice, when: day(3, 11, 40),
		msg:   "Tune the consumer lag alarm\n\nThree minutes paged on every deploy.\n",
		edits: [][3]string{{kafkaFile, "evaluation_periods  = 3", "evaluation_periods  = 5"}},
	},
}

var mainDuringPR = step{
	author: optimizer, when: day(3, 20, 0),
	msg: "Right-size the Kafka consumers (#15)\n\nAverage utilisation over 14 days: 31%.\n\nIntent: cost\nMotivation: budget\n" +
		"Signed-off-by: Cost Optimizer <cost-optimizer@parley.example>\n",
	edits: [][3]string{{kafkaFile, "desired_capacity    = 6", "desired_capacity    = 4"}},
}

var mainAfter = []step{
	{
		author: alice, when: day(6, 2, 13),
		msg: "Hotfix: scale consumers and web for INC-4211\n\nConsumer lag at 2.1M messages; checkout latency p99 9s.\n\n" +
			"Intent: availability\nMotivation: incident INC-4211 severity=high\nExpires: 4h\n" +
			"Claim: tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity    = 12\n" +
			"Claim: k8s:apps/Deployment/prod/web#/spec/replicas\n",
		edits: [][3]string{
			{kafkaFile, "desired_capacity    = 4", "desired_capacity    = 12"},
			{kafkaFile, "threshold           = 5000", "threshold           = 20000"},
			{webFile, "replicas: 3", "replicas: 8"},
		},
	},
	{
		author: scanner, when: day(6, 9, 40),
		msg:   "Bump web to 1.41.3 for CVE-2026-1234\n\nIntent: security\nMotivation: cve CVE-2026-1234 severity=critical\n",
		edits: [][3]string{{webFile, "image: registry.example.com/shop/web:1.41.0", "image: registry.example.com/shop/web:1.41.3"}},
	},
	{
		author: bob, when: day(6, 11, 5),
		msg: "Restore the lag alarm after INC-4211 and hand replicas back to the HPA\n\n" +
			"Intent: reliability\nMotivation: maintenance\nExpires: after the incident review\n" +
			"Yield: k8s:apps/Deployment/prod/web#/spec/replicas\n",
		edits: [][3]string{{kafkaFile, "threshold           = 20000", "threshold           = 5000"}},
	},
	{
		author: optimizer, when: day(7, 8, 0),
		msg:   "Right-size the Kafka consumers after INC-4211\n\nIntent: cost\nMotivation: rightsizing\nParley-PR: 17\n",
		edits: [][3]string{{kafkaFile, "desired_capacity    = 12", "desired_capacity    = 5"}},
	},
}

const webYAML = `apiVersion: apps/v1
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
          image: registry.example.com/shop/web:1.41.0
          ports:
            - containerPort: 8080
          resources:
            requests:
              cpu: 500m
              memory: 512Mi
            limits:
              memory: 1Gi
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: web
  namespace: prod
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: web
  minReplicas: 3
  maxReplicas: 12
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: 70
`

const kafkaTF = `resource "aws_autoscaling_group" "consumer" {
  name                = "kafka-consumer"
  min_size            = 4
  max_size            = 16
  desired_capacity    = 6
  vpc_zone_identifier = var.private_subnet_ids

  launch_template {
    id      = aws_launch_template.consumer.id
    version = "$Latest"
  }

  tag {
    key                 = "team"
    value               = "streaming"
    propagate_at_launch = true
  }
}

resource "aws_cloudwatch_metric_alarm" "consumer_lag" {
  alarm_name          = "kafka-consumer-lag"
  comparison_operator = "GreaterThanThreshold"
  evaluation_periods  = 3
  metric_name         = "SumOffsetLag"
  namespace           = "AWS/Kafka"
  period              = 60
  statistic           = "Maximum"
  threshold           = 5000
  alarm_description   = "Consumer group lag on orders"
  alarm_actions       = [aws_autoscaling_policy.consumer_scale_out.arn]
}

resource "aws_iam_role" "consumer" {
  name = "kafka-consumer"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "ec2.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
}

resource "aws_iam_role_policy" "consumer" {
  name = "kafka-consumer-read"
  role = aws_iam_role.consumer.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect   = "Allow"
      Action   = ["kafka-cluster:Connect", "kafka-cluster:ReadData", "kafka-cluster:DescribeGroup"]
      Resource = "*"
    }]
  })
}
`
