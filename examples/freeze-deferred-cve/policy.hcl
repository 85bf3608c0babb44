# Scenario: during the peak-sales freeze, the security scanner patches the checkout image while the
# app team wants stability. The freeze admits only availability work and fixes for critical CVEs
# (a known exploit); anything else waits for the freeze to end.

intent "security"     { rank = 100 }
intent "availability" { rank = 90 }
intent "baseline"     { rank = 10 }

motivation "cve" {
  urgency     = 90
  asserted_by = ["scanner"]
}
motivation "stability" { urgency = 50 }

actor "scanner" {
  intent       = "security"
  intents      = ["security"]
  github_users = ["security-scanner[bot]"]
}
actor "app-team" {
  intent       = "availability"
  github_teams = ["parleyhq/checkout"]
}

rule "exploited-cve" {
  description = "A critical CVE (known exploit) beats stability"
  when        = claim.motivation == "cve" && claim.severity == "critical"
  decision    = "win"
}

freeze "peak-sales" {
  description   = "Black Friday to Cyber Monday"
  start         = "2026-11-27T00:00:00Z"
  end           = "2026-12-01T00:00:00Z"
  allow_intents = ["availability"]
  allow_when    = claim.motivation == "cve" && claim.severity == "critical"
}
