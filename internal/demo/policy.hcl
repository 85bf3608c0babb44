# Parley policy for the demo repository (.parley/policy.hcl on the default branch).
# The language reference is docs/policy.md.

# Intents: why a change is made. When no rule decides, the higher rank wins.
intent "security"     { rank = 100 }
intent "availability" { rank = 90 }
intent "reliability"  { rank = 80 }
intent "performance"  { rank = 60 }
intent "cost"         { rank = 40 }
intent "consistency"  { rank = 20 }
intent "baseline"     { rank = 10 }

# Motivations: why now. Urgency breaks ties between equal ranks; lifetimes bound how long a claim
# lasts; asserted_by says who is trusted to assert it.
motivation "incident" {
  urgency          = 100
  default_lifetime = "4h"
  max_lifetime     = "24h"
  asserted_by      = ["oncall"]
}
motivation "cve" {
  urgency     = 90
  asserted_by = ["scanner", "oncall"]
}
motivation "traffic" {
  urgency          = 70
  default_lifetime = "1h"
}
motivation "launch" {
  urgency      = 60
  max_lifetime = "7d"
}
motivation "budget"      { urgency = 20 }
motivation "maintenance" { urgency = 5 }
motivation "rightsizing" { urgency = 10 }
motivation "baseline"    { urgency = 0 }

# Actors: who writes fields, recognised by identities of every source. First match wins. A commit
# counts as an actor only when one of the actor's signing_keys signed it (git's gpg.format=ssh, or
# OpenPGP) and names its author email, as git's allowed-signers does: anyone can write any author
# email, and Bob's key does not prove Alice. The demo's keys are derived from the emails so that
# the demo is reproducible; they protect nothing.
actor "git" {
  description = "Git itself: the repository's standing configuration"
  intent      = "baseline"
}
actor "platform" {
  description = "The platform team"
  intent      = "consistency"
  git_authors = ["dana@parley.example"]
  signing_keys = ["dana@parley.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ2uBDQOopYI4uqbe2SOzZ1Q+Tkgg8Ei/dnCgbNmPfjf"]
  github_users = ["dana"]
}
actor "hpa" {
  description = "Kubernetes HorizontalPodAutoscaler"
  intent      = "availability"
  motivation  = "traffic" # it scales because load changed
  k8s_users   = ["system:serviceaccount:kube-system:horizontal-pod-autoscaler", "system:kube-controller-manager"]
  field_managers = ["kube-controller-manager"]
}
actor "cost-optimizer" {
  description = "The cost optimizer bot"
  intent      = "cost"
  intents     = ["cost"]
  confined    = true
  github_users = ["cost-optimizer[bot]"]
  git_authors  = ["cost-optimizer@parley.example"]
  signing_keys = ["cost-optimizer@parley.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIzGetKzIOw2Z9Di1o1M2n4tSSFxaLfX7Bys7Qdt0pFb"]
  k8s_users    = ["system:serviceaccount:finops:cost-optimizer"]
}
actor "scanner" {
  description = "The security scanner"
  intent      = "security"
  intents     = ["security"]
  github_users = ["security-scanner[bot]"]
  git_authors  = ["scanner@parley.example"]
  signing_keys = ["scanner@parley.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGYr9+QbL9tJIcs80l+PQdbaxToA8s8xokyOsA+wi8XS"]
}
actor "kafka-agent" {
  description    = "The AI agent that scales the Kafka consumers"
  intent         = "performance"
  intents        = ["performance", "cost"]
  confined       = true
  aws_principals = ["arn:aws:sts::*:assumed-role/kafka-scaling-agent/*", "arn:aws:iam::*:role/kafka-scaling-agent"]
}
actor "oncall" {
  description  = "Humans on call"
  intent       = "availability"
  github_teams = ["parleyhq/sre"]
  git_authors  = ["alice@parley.example", "bob@parley.example"]
  signing_keys = [
    "alice@parley.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOdVVxmP91uVq8c4dWtrR81GBkh+FNNlaf3WWqwBMHan",
    "bob@parley.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF7j/YAI+xf+l+TtGhEOVFUMTZg4NkBhZ8oGOMLIX36C",
  ]
  k8s_users    = ["alice@parley.example", "bob@parley.example"]
  aws_principals = ["arn:aws:sts::*:assumed-role/oncall/*"]
}

# Fields. The first block matching a field applies.

# The immutable skeleton: networks and IAM change only through reviewed Git changes.
field "skeleton" {
  description = "VPCs, subnets and IAM"
  match = [
    "tf:**//aws_vpc.*",
    "tf:**//aws_subnet.*",
    "tf:**//aws_iam_*",
  ]
  immutable = true
}

# The HPA owns the replicas of every Deployment that has an HPA targeting it.
field "replicas" {
  match      = ["k8s:apps/Deployment/*/*#/spec/replicas"]
  owner      = "hpa"
  owner_when = contains(git_values("k8s:autoscaling/HorizontalPodAutoscaler/${field.namespace}/*#/spec/scaleTargetRef/name"), field.name)
  min        = 1
}

# The mutable musculature: the Kafka agent may tune the consumer group's desired capacity, within
# the bounds Terraform declares (the HCL bound check).
field "kafka-capacity" {
  match   = ["tf:**//aws_autoscaling_group.*#/desired_capacity"]
  writers = ["kafka-agent", "oncall", "cost-optimizer"]
  min     = git("${field.object}#/min_size")
  max     = git("${field.object}#/max_size")
}

# The Kafka consumer lag alarm may be tuned by the agent and on-call.
field "kafka-alarm" {
  match   = ["tf:**//aws_cloudwatch_metric_alarm.*#/threshold", "tf:**//aws_cloudwatch_metric_alarm.*#/evaluation_periods"]
  writers = ["kafka-agent", "oncall"]
  min     = 1
}

# Rules: checked in order for each pair of competing claims; the first that holds decides.
rule "no-cost-cuts-during-incident" {
  description = "Cost claims are vetoed while an incident claim is live"
  when        = claim.intent == "cost" && other.motivation == "incident"
  decision    = "veto"
}

rule "incident-first" {
  description = "A trusted incident claim beats anything that is not an incident"
  when        = claim.motivation == "incident" && other.motivation != "incident"
  decision    = "win"
}

rule "exploited-cve" {
  description = "A critical CVE fix beats every other intent"
  when        = claim.motivation == "cve" && claim.severity == "critical" && other.motivation != "incident"
  decision    = "win"
}

rule "live-traffic-over-budget" {
  description = "Scaling for live traffic beats saving money"
  when        = claim.intent == "availability" && other.intent == "cost"
  decision    = "win"
}

# Freeze windows: peak sales. Changes are deferred unless they keep the service up or fix an
# exploited vulnerability.
freeze "peak-sales" {
  start         = "2026-11-27T00:00:00Z"
  end           = "2026-12-01T00:00:00Z"
  allow_intents = ["availability"]
  allow_when    = claim.motivation == "cve" && claim.severity == "critical"
}

# Two or more actors flipping a field three times within an hour: hold it and ask humans.
oscillation {
  flips  = 3
  window = "1h"
  hold   = "4h"
}

# When nothing decides: ask the SRE team, and keep Git's value if nobody answers within 30 minutes.
escalation {
  ask      = ["@parleyhq/sre"]
  timeout  = "30m"
  fallback = "enforce-git"
}
