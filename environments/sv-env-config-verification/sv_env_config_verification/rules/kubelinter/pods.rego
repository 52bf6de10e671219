# KubeLinter's default pod-level checks: host namespaces and mounts, sysctls, service
# account fields, scheduling (anti-affinity), selectors and Job clean-up.
package svcv.kubelinter

import rego.v1

rules["host-network"] := {"severity": "high", "title": "Pod shares the node's network namespace (hostNetwork)"}

rules["host-pid"] := {"severity": "high", "title": "Pod shares the node's process namespace (hostPID)"}

rules["host-ipc"] := {"severity": "high", "title": "Pod shares the node's IPC namespace (hostIPC)"}

host_namespaces := {"hostNetwork": "host-network", "hostPID": "host-pid", "hostIPC": "host-ipc"}

deny contains f if {
	some i, obj in workloads
	some field, id in host_namespaces
	specs[i][field] == true
	f := finding(i, id, sprintf("%v: %v: true", [resource_name(obj), field]))
}

rules["docker-sock"] := {"severity": "high", "title": "Container mounts the Docker socket from the node"}

rules["sensitive-host-mounts"] := {"severity": "high", "title": "Container mounts a sensitive node directory (/, /boot, /dev, /etc, /lib, /proc, /sys, /usr)"}

# [document, hostPath path, container] for every hostPath volume a container mounts.
host_mounts contains [i, path, container_name(c)] if {
	some i, obj in workloads
	spec := specs[i]
	some v in as_array(object.get(spec, "volumes", []))
	path := v.hostPath.path
	is_string(path)
	some c in all_containers(spec)
	some m in as_array(object.get(c, "volumeMounts", []))
	m.name == v.name
}

sensitive_dirs := {"/", "/boot", "/dev", "/etc", "/lib", "/proc", "/sys", "/usr"}

deny contains f if {
	some [i, path, cname] in host_mounts
	regex.match(`docker\.sock$`, path)
	f := finding(i, "docker-sock", sprintf("%v: container %v mounts the Docker socket %v", [resource_name(docs[i]), cname, path]))
}

deny contains f if {
	some [i, path, cname] in host_mounts
	path in sensitive_dirs
	f := finding(i, "sensitive-host-mounts", sprintf("%v: container %v mounts node directory %v", [resource_name(docs[i]), cname, path]))
}

rules["unsafe-sysctls"] := {"severity": "medium", "title": "Pod sets an unsafe sysctl (kernel.msg*, kernel.sem*, kernel.shm*, fs.mqueue.*, net.*)"}

unsafe_sysctl_prefixes := ["kernel.msg", "kernel.sem", "kernel.shm", "fs.mqueue.", "net."]

deny contains f if {
	some i, obj in workloads
	some s in as_array(object.get(specs[i], ["securityContext", "sysctls"], []))
	is_string(s.name)
	some prefix in unsafe_sysctl_prefixes
	startswith(s.name, prefix)
	f := finding(i, "unsafe-sysctls", sprintf("%v: sets unsafe sysctl %v", [resource_name(obj), s.name]))
}

rules["deprecated-service-account-field"] := {"severity": "low", "title": "Pod uses the deprecated serviceAccount field"}

deny contains f if {
	some i, obj in workloads
	spec := specs[i]
	account := object.get(spec, "serviceAccount", "")
	not account in {"", null}
	account != object.get(spec, "serviceAccountName", "")
	f := finding(i, "deprecated-service-account-field", sprintf("%v: sets the deprecated serviceAccount (%v) without a matching serviceAccountName", [resource_name(obj), account]))
}

rules["no-anti-affinity"] := {"severity": "low", "title": "Several replicas but no pod anti-affinity spreading them over nodes"}

replicas(obj) := n if {
	n := object.get(obj.spec, "replicas", 1)
	n != null
} else := 1

# Anti-affinity terms: the required ones and the preferred ones' podAffinityTerm.
anti_affinity_terms(spec) := array.concat(
	[t | some t in as_array(object.get(spec, ["affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution"], []))],
	[t | some w in as_array(object.get(spec, ["affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution"], [])); t := w.podAffinityTerm],
)

# A term that spreads this object's own pods over nodes.
spreads_over_nodes(term, obj) if {
	is_object(term)
	namespaces := as_array(object.get(term, "namespaces", []))
	namespace_ok(namespaces, namespace_of(obj))
	term.topologyKey == "kubernetes.io/hostname"
	selector_matches(term.labelSelector, template_labels(obj))
}

namespace_ok(namespaces, _) if count(namespaces) == 0

namespace_ok(namespaces, ns) if ns in namespaces

deny contains f if {
	some i, obj in workloads
	obj.kind in replicated_kinds
	n := replicas(obj)
	is_number(n)
	n >= 2
	terms := anti_affinity_terms(specs[i])
	not any_spreads(terms, obj)
	f := finding(i, "no-anti-affinity", sprintf("%v: %v replicas and no podAntiAffinity term on kubernetes.io/hostname matching its own pods", [resource_name(obj), n]))
}

any_spreads(terms, obj) if {
	some term in terms
	spreads_over_nodes(term, obj)
}

rules["mismatching-selector"] := {"severity": "medium", "title": "Workload selector is missing or does not match its pod template labels"}

# Kinds whose spec.selector is a LabelSelector that must be set.
selector_required := {"Deployment", "StatefulSet", "ReplicaSet", "DaemonSet"}

workload_selector(obj) := object.get(obj.spec, "selector", null) if obj.kind in selector_kinds

# A Job's selector is optional (generated when unset), but one that is set must match.
selector_kinds := selector_required | {"Job"}

workload_selector(obj) := object.get(obj.spec, ["jobTemplate", "spec", "selector"], null) if obj.kind == "CronJob"

deny contains f if {
	some i, obj in workloads
	obj.kind in selector_required
	selector_empty(workload_selector(obj))
	f := finding(i, "mismatching-selector", sprintf("%v: has no spec.selector", [resource_name(obj)]))
}

deny contains f if {
	some i, obj in workloads
	sel := workload_selector(obj)
	not selector_empty(sel)
	not selector_matches(sel, template_labels(obj))
	f := finding(i, "mismatching-selector", sprintf("%v: selector does not match the pod template labels %v", [resource_name(obj), template_labels(obj)]))
}

# DeploymentConfig (OpenShift) keeps a plain label map as its selector.
deny contains f if {
	some i, obj in workloads
	obj.kind == "DeploymentConfig"
	sel := as_object(object.get(obj.spec, "selector", {}))
	not map_selector_matches(sel, template_labels(obj))
	f := finding(i, "mismatching-selector", sprintf("%v: selector %v is empty or does not match the pod template labels", [resource_name(obj), sel]))
}

rules["job-ttl-seconds-after-finished"] := {"severity": "low", "title": "Standalone Job without ttlSecondsAfterFinished (or a CronJob's Job with one)"}

deny contains f if {
	some i, obj in docs
	obj.kind == "Job"
	obj.apiVersion == "batch/v1"
	object.get(obj, ["spec", "ttlSecondsAfterFinished"], null) == null
	f := finding(i, "job-ttl-seconds-after-finished", sprintf("%v: standalone Job sets no spec.ttlSecondsAfterFinished, so it is never cleaned up", [resource_name(obj)]))
}

deny contains f if {
	some i, obj in docs
	obj.kind == "CronJob"
	obj.apiVersion == "batch/v1"
	object.get(obj, ["spec", "jobTemplate", "spec", "ttlSecondsAfterFinished"], null) != null
	f := finding(i, "job-ttl-seconds-after-finished", sprintf("%v: its Job template sets ttlSecondsAfterFinished, which competes with the CronJob's history limits", [resource_name(obj)]))
}
