# Scenario: the oscillation scenario without an escalation block. The Kafka scaling agent sets
# desired capacity 8, a guardrail resets it to 4, again and again: the field is held at Git's value.
# The policy names nobody to ask, so Parley asks the code owners of the file that defines the field
# (infra/kafka/main.tf, by the scenario's .github/CODEOWNERS): someone is always asked.

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
