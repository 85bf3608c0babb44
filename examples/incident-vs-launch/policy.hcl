# Scenario: a scheduled launch raised capacity to 20 replicas for three days; an incident response
# asks for the same 20. If one must yield, the scheduled change does: the incident claim wins, and
# the launch claim takes over when the incident claim ends.

intent "availability" { rank = 90 }

motivation "incident" {
  urgency          = 100
  default_lifetime = "4h"
  asserted_by      = ["oncall"]
}
motivation "launch" {
  urgency      = 60
  max_lifetime = "7d"
  asserted_by  = ["release-managers", "oncall"]
}

actor "oncall" {
  intent       = "availability"
  github_teams = ["parleyhq/sre"]
}
actor "release-managers" {
  intent       = "availability"
  github_teams = ["parleyhq/releases"]
}
