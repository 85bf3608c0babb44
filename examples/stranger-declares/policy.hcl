# Scenario: during the peak-sales freeze, a cluster user no actor names bumps the checkout image and
# declares what would pass the freeze and outrank Git: intent availability, motivation stability, an
# expiry. No unknown_actors block, so an identity no actor vouches for may declare nothing:
# declaring never beats silence, and its change waits like any undeclared change.

intent "security"     { rank = 100 }
intent "availability" { rank = 90 }
intent "baseline"     { rank = 10 }

motivation "stability" { urgency = 50 }

actor "app-team" {
  intent       = "availability"
  github_teams = ["parleyhq/checkout"]
}

# The owner of the image gives way to a temporary change: the expiry a stranger states must not
# count here either.
rule "temporary-first" {
  description = "A change that says when it ends beats a lasting one"
  when        = claim.expires != "" && other.expires == ""
  decision    = "win"
}

freeze "peak-sales" {
  description   = "Black Friday to Cyber Monday"
  start         = "2026-11-27T00:00:00Z"
  end           = "2026-12-01T00:00:00Z"
  allow_intents = ["availability"]
}
