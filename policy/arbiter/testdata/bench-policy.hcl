# A realistic policy for the benchmark: 7 intents, 6 motivations, 7 actors, 5 field blocks, 10 rules,
# a freeze window, oscillation and escalation.
intent "security"     { rank = 100 }
intent "availability" { rank = 90 }
intent "reliability"  { rank = 80 }
intent "performance"  { rank = 60 }
intent "cost"         { rank = 40 }
intent "consistency"  { rank = 20 }
intent "baseline"     { rank = 10 }

motivation "incident" {
  urgency          = 100
  default_lifetime = "4h"
  max_lifetime     = "24h"
  asserted_by      = ["oncall"]
}
motivation "cve"         { urgency = 90 }
motivation "traffic"     { urgency = 70 }
motivation "launch"      { urgency = 60 }
motivation "budget"      { urgency = 20 }
motivation "rightsizing" { urgency = 10 }

actor "hpa" {
  intent         = "availability"
  k8s_users      = ["system:serviceaccount:kube-system:horizontal-pod-autoscaler"]
  field_managers = ["kube-controller-manager"]
}
actor "cost-optimizer" {
  intent    = "cost"
  intents   = ["cost"]
  k8s_users = ["system:serviceaccount:finops:cost-optimizer"]
}
actor "scanner" {
  intent       = "security"
  github_users = ["security-scanner[bot]"]
}
actor "kafka-agent" {
  intent         = "performance"
  confined       = true
  aws_principals = ["arn:aws:sts::*:assumed-role/kafka-scaling-agent/*"]
}
actor "oncall" {
  intent       = "availability"
  github_teams = ["acme/sre"]
  k8s_users    = ["*@acme.example"]
}
actor "release" {
  intent       = "availability"
  github_teams = ["acme/releases"]
}

field "skeleton" {
  match     = ["tf:**//aws_vpc.*", "tf:**//aws_iam_*"]
  immutable = true
}
field "replicas" {
  match = ["k8s:apps/Deployment/*/*#/spec/replicas"]
  min   = 1
  max   = 200
}
field "capacity" {
  match   = ["tf:**//aws_autoscaling_group.*#/desired_capacity"]
  writers = ["kafka-agent", "oncall", "cost-optimizer"]
  min     = git("${field.object}#/min_size")
  max     = git("${field.object}#/max_size")
}
field "alarms" {
  match   = ["tf:**//aws_cloudwatch_metric_alarm.*#/threshold"]
  writers = ["kafka-agent", "oncall"]
  min     = 1
}
field "config" {
  match = ["k8s:core/ConfigMap/*/*#/data/*"]
}

rule "no-cost-cuts-during-incident" {
  when     = claim.intent == "cost" && other.motivation == "incident"
  decision = "veto"
}
rule "incident-first" {
  when     = claim.motivation == "incident" && other.motivation != "incident"
  decision = "win"
}
rule "exploited-cve" {
  when     = claim.motivation == "cve" && claim.severity == "critical" && other.motivation != "incident"
  decision = "win"
}
rule "traffic-over-budget" {
  when     = claim.intent == "availability" && contains(["traffic", "launch"], claim.motivation) && other.intent == "cost"
  decision = "win"
}
rule "launch-over-rightsizing" {
  when     = claim.motivation == "launch" && other.motivation == "rightsizing"
  decision = "win"
}
rule "oncall-over-bots" {
  when     = claim.actor == "oncall" && contains(["cost-optimizer", "kafka-agent"], other.actor)
  decision = "win"
}
rule "agent-over-baseline" {
  fields   = ["tf:**//aws_autoscaling_group.*#/desired_capacity"]
  when     = claim.actor == "kafka-agent" && other.git && other.intent == "baseline"
  decision = "win"
}
rule "scanner-vs-release" {
  when     = claim.actor == "scanner" && other.actor == "release" && claim.severity != "critical"
  decision = "escalate"
}
rule "explicit-beats-implicit" {
  when     = claim.explicit && !other.explicit && claim.rank >= other.rank && !other.git
  decision = "win"
}
rule "unknown-actors-lose" {
  when     = claim.actor != "" && other.actor == "" && !other.git
  decision = "win"
}

freeze "year-end" {
  start         = "2026-12-20T00:00:00Z"
  end           = "2027-01-04T00:00:00Z"
  allow_intents = ["availability", "security"]
}

oscillation {
  flips  = 3
  window = "1h"
}

escalation {
  ask      = ["@acme/sre"]
  timeout  = "30m"
  fallback = "enforce-git"
}
