# Scenario: the Kafka scaling agent is confined to its musculature (the fields that list it as a
# writer). It changes an IAM policy: veto. IAM is also part of the immutable skeleton, so an
# on-call human's live edit is vetoed too: IAM changes go through reviewed Git changes only.

intent "performance"  { rank = 60 }
intent "availability" { rank = 90 }

actor "kafka-agent" {
  intent         = "performance"
  confined       = true
  aws_principals = ["arn:aws:sts::*:assumed-role/kafka-scaling-agent/*"]
}
actor "oncall" {
  intent         = "availability"
  aws_principals = ["arn:aws:sts::*:assumed-role/oncall/*"]
}

field "skeleton" {
  description = "VPCs and IAM"
  match       = ["tf:**//aws_vpc.*", "tf:**//aws_iam_*"]
  immutable   = true
}

field "musculature" {
  description = "What the agent may tune"
  match       = ["tf:**//aws_autoscaling_group.*#/desired_capacity"]
  writers     = ["kafka-agent", "oncall"]
}
