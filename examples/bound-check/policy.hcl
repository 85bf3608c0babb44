# Scenario: the Kafka scaling agent sets desired_capacity above the max_size Terraform declares for
# the same autoscaling group. The bound is read from Git: veto.

intent "performance" { rank = 60 }

actor "kafka-agent" {
  intent         = "performance"
  confined       = true
  aws_principals = ["arn:aws:sts::*:assumed-role/kafka-scaling-agent/*"]
}

field "asg-capacity" {
  description = "Desired capacity of autoscaling groups: agent-tunable within Terraform's bounds"
  match       = ["tf:**//aws_autoscaling_group.*#/desired_capacity"]
  writers     = ["kafka-agent"]
  min         = git("${field.object}#/min_size")
  max         = git("${field.object}#/max_size")
}
