package svcv.kubernetes

import rego.v1

rules["k8s-rbac-wildcard"] := {"severity": "high", "title": "RBAC rule grants wildcard verbs or resources"}

deny contains f if {
	input.kind in {"Role", "ClusterRole"}
	some r in input.rules
	some field in ["verbs", "resources"]
	"*" in object.get(r, field, [])
	f := finding("k8s-rbac-wildcard", sprintf("%v: rule grants %v: [\"*\"]", [resource_name, field]))
}
