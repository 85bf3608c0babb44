# Scenario: IAM is part of the immutable skeleton: only a reviewed Git change may alter it. During a
# critical CVE the security team's admin role (trusted to assert cve) tightens the consumer's IAM
# policy in the AWS console. The change is vetoed and Git's value stands, so the next terraform
# apply would undo a security fix; but the field block puts such a veto to people: a pull request
# proposes the tightened policy as a Git change and asks the security leads. A developer's console
# edit claiming the same CVE is not trusted with cve, so its veto only refuses.

intent "security"    { rank = 100 }
intent "consistency" { rank = 20 }

motivation "cve" {
  urgency     = 90
  asserted_by = ["security-admin"]
}

actor "security-admin" {
  intent         = "security"
  aws_principals = ["arn:aws:sts::*:assumed-role/SecurityAdmin/*"]
}
actor "developers" {
  intent         = "consistency"
  aws_principals = ["arn:aws:sts::*:assumed-role/Developer/*"]
}

field "skeleton" {
  description   = "VPCs and IAM"
  match         = ["tf:**//aws_vpc.*", "tf:**//aws_iam_*"]
  immutable     = true
  veto_ask_when = claim.motivation == "cve"
  veto_ask      = ["@acme/security-leads"]
}
