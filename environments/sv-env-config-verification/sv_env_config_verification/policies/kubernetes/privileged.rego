package svcv.kubernetes

import rego.v1

rules["k8s-privileged-container"] := {"severity": "high", "title": "Container runs privileged (full access to the host)"}

deny contains f if {
	some c in containers
	object.get(c, ["securityContext", "privileged"], false) == true
	f := finding("k8s-privileged-container", sprintf("%v: container %v sets securityContext.privileged: true", [resource_name, c.name]))
}

rules["k8s-allow-privilege-escalation"] := {"severity": "medium", "title": "Container may gain more privileges than its parent (allowPrivilegeEscalation not false)"}

deny contains f if {
	some c in containers
	effective(c, "allowPrivilegeEscalation") != false
	f := finding("k8s-allow-privilege-escalation", sprintf("%v: container %v does not set allowPrivilegeEscalation: false", [resource_name, c.name]))
}
