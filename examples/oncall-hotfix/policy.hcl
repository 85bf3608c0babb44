# Scenario: at 2 am the on-call engineer raises the database pool size to get through an incident.
# Git's value (applied again by the 9 am cron) is consistency. The hotfix wins until it expires;
# then Git's value returns. A developer who is not on call also claims an incident: not trusted.

intent "availability" { rank = 90 }
intent "consistency"  { rank = 20 }

motivation "incident" {
  urgency          = 100
  default_lifetime = "4h"
  max_lifetime     = "12h"
  asserted_by      = ["oncall"]
}

actor "git" {
  intent  = "consistency"
}
actor "oncall" {
  intent    = "availability"
  k8s_users = ["alice@parley.example", "bob@parley.example"]
}
actor "developers" {
  intent    = "consistency"
  intents   = ["consistency"]
  k8s_users = ["*@parley.example"]
}

rule "incident-first" {
  description = "A trusted incident claim beats anything that is not an incident"
  when        = claim.motivation == "incident" && other.motivation != "incident"
  decision    = "win"
}
