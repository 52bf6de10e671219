package svcv.terraform

import rego.v1

rules["tf-iam-wildcard-action"] := {"severity": "high", "title": "IAM policy allows every action (\"*\")"}

policy_types := {"aws_iam_policy", "aws_iam_role_policy", "aws_iam_user_policy", "aws_iam_group_policy"}

# Matches `"Action": "*"`, `Action = "*"` and lists containing "*" (not NotAction, not "s3:*").
# Each quote may carry a backslash: regopy 1.5 hands regex.match strings in their escaped form.
wildcard_action_pattern := `(^|[^A-Za-z])\\?"?Action\\?"?\s*[=:]\s*(\[[^\]]*)?\\?"\*\\?"`

deny contains f if {
	some r in object.get(input, "resources", [])
	r.type in policy_types
	is_string(r.config.policy)
	regex.match(wildcard_action_pattern, r.config.policy)
	f := finding("tf-iam-wildcard-action", r, sprintf("%v.%v: policy allows Action \"*\"", [r.type, r.name]))
}

deny contains f if {
	some r in object.get(input, "data", [])
	r.type == "aws_iam_policy_document"
	some s in blocks(cfg(r, "statement", []))
	object.get(s, "effect", "Allow") == "Allow"
	"*" in object.get(s, "actions", [])
	f := finding("tf-iam-wildcard-action", r, sprintf("data.%v.%v: statement allows actions [\"*\"]", [r.type, r.name]))
}
