package svcv.kubernetes

import rego.v1

rules["k8s-no-resource-limits"] := {"severity": "low", "title": "Container has no CPU or memory limit"}

deny contains f if {
	some c in containers
	some kind in ["cpu", "memory"]
	object.get(c, ["resources", "limits", kind], null) == null
	f := finding("k8s-no-resource-limits", sprintf("%v: container %v has no resources.limits.%v", [resource_name, c.name, kind]))
}
