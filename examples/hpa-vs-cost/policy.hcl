# Scenario: the HPA scales up for a live traffic spike while the cost optimizer, working to the
# monthly budget, wants fewer replicas. Availability under live traffic beats cost: the HPA wins.

intent "availability" { rank = 90 }
intent "cost"         { rank = 40 }

motivation "traffic" {
  urgency          = 70
  default_lifetime = "30m" # the HPA restates its wish on every scale; a silent HPA lets go
}
motivation "budget" { urgency = 20 }

actor "hpa" {
  intent    = "availability"
  k8s_users = ["system:serviceaccount:kube-system:horizontal-pod-autoscaler"]
}
actor "cost-optimizer" {
  intent    = "cost"
  intents   = ["cost"]
  k8s_users = ["system:serviceaccount:finops:cost-optimizer"]
}

field "replicas" {
  match = ["k8s:apps/Deployment/*/*#/spec/replicas"]
  min   = 1
  max   = 50
}

rule "live-traffic-over-budget" {
  description = "Scaling for live traffic beats saving money"
  when        = claim.intent == "availability" && claim.motivation == "traffic" && other.intent == "cost"
  decision    = "win"
}
