package policy

// Starter is the commented starter policy 'parley init' writes. It parses cleanly (a test checks)
// and is meant to be edited: every construct of the language appears once, with a comment.
const Starter = `# Parley policy: who wins a field, and why. Reference: docs/policy.md
# Parley reads this file from the repository's default branch, never from a pull request's head.

# Intents say why a change is made. When no rule decides between two claims, the higher rank wins.
intent "security"     { rank = 100 }
intent "availability" { rank = 90 }
intent "cost"         { rank = 40 }
intent "consistency"  { rank = 20 }
intent "baseline"     { rank = 10 } # Git's standing configuration

# Motivations say why now. Urgency breaks ties between equal ranks. A claim with a motivation lasts
# default_lifetime unless it says otherwise, and never longer than max_lifetime. Only the actors in
# asserted_by may assert it: anyone else's claim is downgraded to no motivation.
motivation "incident" {
  urgency          = 100
  default_lifetime = "4h"
  max_lifetime     = "24h"
  asserted_by      = ["oncall"]
}
motivation "cve"    { urgency = 90 }
motivation "budget" { urgency = 20 }

# Actors are matched from identities, first declared first: git_authors (commit emails),
# github_users, github_teams, k8s_users (users and service accounts), field_managers (SSA) and
# aws_principals (ARNs). * matches anything. "git" is Git itself and needs no identities.
actor "git" {
  intent = "baseline"
}
actor "oncall" {
  intent       = "availability"
  github_teams = ["my-org/sre"]
  # A commit counts as an actor's only when a key listed for its author email signed it: name the
  # emails and their keys together (lines of git's allowed-signers file), for example
  # git_authors  = ["alice@my-org.example"]
  # signing_keys = ["alice@my-org.example ssh-ed25519 AAAAC3Nza..."]
}
actor "hpa" {
  intent    = "availability"
  k8s_users = ["system:serviceaccount:kube-system:horizontal-pod-autoscaler"]
}
actor "cost-bot" {
  intent   = "cost"
  intents  = ["cost"] # the only intent it may assert
  confined = true     # it may only write fields that list it in writers
  github_users = ["cost-bot[bot]"]
}

# Identities no actor vouches for (no actor matches them, or a commit's signature proves none: any
# cluster user, any pull request's author) may declare nothing: their claims count as baseline,
# with no motivation, and conditions see no expiry they state. Declaring never beats silence. List
# here what anyone may declare; this block as written changes nothing.
unknown_actors {
  intent      = "baseline"
  intents     = []
  motivations = []
  expiry      = false
}

# Fields: the first block whose patterns match a field applies.
field "skeleton" {
  description = "Networks and IAM change only through reviewed Git changes"
  match       = ["tf:**//aws_vpc.*", "tf:**//aws_iam_*"]
  immutable   = true
}
field "replicas" {
  match      = ["k8s:apps/Deployment/*/*#/spec/replicas"]
  owner      = "hpa" # the HPA owns replicas of Deployments that have an HPA:
  owner_when = contains(git_values("k8s:autoscaling/HorizontalPodAutoscaler/${field.namespace}/*#/spec/scaleTargetRef/name"), field.name)
  min        = 1
}
field "capacity" {
  match   = ["tf:**//aws_autoscaling_group.*#/desired_capacity"]
  writers = ["cost-bot", "oncall"]
  min     = git("${field.object}#/min_size") # bounds read from Git (the HCL bound check)
  max     = git("${field.object}#/max_size")
}

# Rules decide between two competing claims, in order: the first whose condition holds for
# (claim, other) applies its decision: win, veto, hold or escalate.
rule "incident-first" {
  when     = claim.motivation == "incident" && other.motivation != "incident"
  decision = "win"
}
rule "availability-over-cost" {
  when     = claim.intent == "availability" && other.intent == "cost"
  decision = "win"
}

# Freeze windows defer changes, except the intents allowed and claims allow_when admits.
freeze "year-end" {
  start         = "2026-12-20T00:00:00Z"
  end           = "2027-01-04T00:00:00Z"
  allow_intents = ["availability"]
  allow_when    = claim.motivation == "cve" && claim.severity == "critical"
}

# Actors flipping a field back and forth: hold it and ask humans.
oscillation {
  flips  = 3
  window = "1h"
  hold   = "4h"
}

# When nothing decides: ask these people, and fall back after the timeout.
escalation {
  ask      = ["@my-org/sre"]
  timeout  = "30m"
  fallback = "enforce-git"
}
`
