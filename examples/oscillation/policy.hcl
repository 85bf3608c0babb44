# Scenario: the Kafka scaling agent sets desired capacity 8; a guardrail bot resets it to 4; again
# and again. Three flips within an hour by two actors: hold the field and ask humans.

intent "performance" { rank = 60 }
intent "reliability" { rank = 60 }

actor "kafka-agent" {
  intent         = "performance"
  aws_principals = ["arn:aws:sts::*:assumed-role/kafka-scaling-agent/*"]
}
actor "guardrail" {
  intent         = "reliability"
  aws_principals = ["arn:aws:sts::*:assumed-role/capacity-guardrail/*"]
}

rule "agent-tunes" {
  description = "The agent's tuning beats the guardrail's reset"
  when        = claim.actor == "kafka-agent" && other.actor == "guardrail"
  decision    = "win"
}

oscillation {
  flips  = 3
  window = "1h"
  hold   = "2h"
}

escalation {
  ask      = ["@parleyhq/data-platform"]
  timeout  = "1h"
  fallback = "hold"
}
