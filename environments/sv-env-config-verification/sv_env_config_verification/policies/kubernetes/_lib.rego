# Shared helpers for the Kubernetes rules. Input: ONE parsed YAML document (a manifest).
# Every rule registers itself in `rules` (id -> severity, title) and adds findings to `deny`.
package svcv.kubernetes

import rego.v1

workload_kinds := {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController"}

pod_spec := input.spec if input.kind == "Pod"

pod_spec := input.spec.template.spec if input.kind in workload_kinds

pod_spec := input.spec.jobTemplate.spec.template.spec if input.kind == "CronJob"

containers contains c if {
	some c in pod_spec.containers
}

containers contains c if {
	some c in pod_spec.initContainers
}

resource_name := sprintf("%v/%v", [input.kind, object.get(input, ["metadata", "name"], "?")])

# A finding object; Python turns it into Finding(tool="opa", rule=..., severity=...).
finding(id, msg) := {"rule": id, "severity": rules[id].severity, "msg": msg}

# The container's own securityContext value for `key`, else the pod's, else null.
effective(c, key) := object.get(c, ["securityContext", key], object.get(pod_spec, ["securityContext", key], null))
