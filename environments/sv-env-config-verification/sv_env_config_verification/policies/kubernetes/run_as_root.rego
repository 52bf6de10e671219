package svcv.kubernetes

import rego.v1

rules["k8s-run-as-root"] := {"severity": "medium", "title": "Container may run as root (runAsUser 0 or runAsNonRoot not true)"}

deny contains f if {
	some c in containers
	effective(c, "runAsUser") == 0
	f := finding("k8s-run-as-root", sprintf("%v: container %v runs as UID 0", [resource_name, c.name]))
}

deny contains f if {
	some c in containers
	effective(c, "runAsUser") != 0
	effective(c, "runAsNonRoot") != true
	f := finding("k8s-run-as-root", sprintf("%v: container %v does not set runAsNonRoot: true", [resource_name, c.name]))
}
