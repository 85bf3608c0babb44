# Scenario: the HPA is the standing owner of the web Deployment's replicas. During INC-5120 the
# on-call engineer pins them at 12 for four hours: the field block lets the owner give way to a
# trusted incident claim, so on-call holds the field until the claim expires, then the HPA has it
# back. A developer who is not on call also claims the incident: not trusted, so the HPA keeps it.

intent "availability" { rank = 90 }
intent "consistency"  { rank = 20 }

motivation "incident" {
  urgency          = 100
  default_lifetime = "4h"
  max_lifetime     = "12h"
  asserted_by      = ["oncall"]
}

actor "hpa" {
  intent    = "availability"
  k8s_users = ["system:serviceaccount:kube-system:horizontal-pod-autoscaler"]
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

# The HPA owns the replicas of every Deployment an HPA targets, except while a trusted incident
# claim that expires competes for them (the claim is seen after trust: only oncall may assert an
# incident).
field "replicas" {
  match                = ["k8s:apps/Deployment/*/*#/spec/replicas"]
  owner                = "hpa"
  owner_when           = contains(git_values("k8s:autoscaling/HorizontalPodAutoscaler/${field.namespace}/*#/spec/scaleTargetRef/name"), field.name)
  owner_gives_way_when = claim.motivation == "incident" && claim.expires != ""
  min                  = 1
}
