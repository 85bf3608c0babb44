# Scenario: only on-call may assert an incident, and an incident claim lasts at most 24 hours. On
# Monday on-call scales the checkout service to 12 for INC-7001: yielded for 24 hours, then Git's
# value returns. On Wednesday a developer who is not on call claims the same incident for the same
# 12. The motivation is downgraded (the developer may not assert it), but the claim keeps the
# incident's lifetime: it is yielded no longer than on-call's honest claim was, never adopted.

intent "availability" { rank = 90 }
intent "consistency"  { rank = 20 }

motivation "incident" {
  urgency          = 100
  default_lifetime = "24h"
  max_lifetime     = "24h"
  asserted_by      = ["oncall"]
}

actor "git" {
  intent = "consistency"
}
actor "oncall" {
  intent    = "availability"
  k8s_users = ["alice@parley.example"]
}
actor "developers" {
  intent    = "availability"
  k8s_users = ["*@parley.example"]
}
