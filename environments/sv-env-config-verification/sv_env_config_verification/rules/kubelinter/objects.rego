# KubeLinter's default checks on single non-workload objects: API versions, Service ports
# and PodDisruptionBudgets.
package svcv.kubelinter

import rego.v1

rules["no-extensions-v1beta"] := {"severity": "low", "title": "Object uses a removed extensions/v1beta* API version"}

# KubeLinter matches the group as an unanchored pattern, so apiextensions.k8s.io/v1beta1
# (also removed) is flagged too.
deny contains f if {
	some i, obj in docs
	is_string(obj.apiVersion)
	[group, version] := group_version(obj.apiVersion)
	contains(group, "extensions")
	regex.match(`v1beta.+`, version)
	f := finding(i, "no-extensions-v1beta", sprintf("%v: uses API version %v", [resource_name(obj), obj.apiVersion]))
}

deny contains f if {
	some i, obj in docs
	obj.kind == "Service"
	some p in as_array(object.get(obj, ["spec", "ports"], []))
	target := object.get(p, "targetPort", 0)
	is_string(target)
	not valid_port_name(target)
	f := finding(i, "invalid-target-ports", sprintf("%v: targetPort %v is not a valid port name (a number must be unquoted)", [resource_name(obj), target]))
}

deny contains f if {
	some i, obj in docs
	obj.kind == "Service"
	some p in as_array(object.get(obj, ["spec", "ports"], []))
	target := object.get(p, "targetPort", 0)
	is_number(target)
	target != 0
	not valid_port_number(target)
	f := finding(i, "invalid-target-ports", sprintf("%v: targetPort %v is outside 1-65535", [resource_name(obj), target]))
}

valid_port_number(n) if {
	n >= 1
	n <= 65535
	n == floor(n)
}

# --- PodDisruptionBudgets (policy/v1 only, as KubeLinter) -----------------------------

pdbs[i] := obj if {
	some i, obj in docs
	obj.kind == "PodDisruptionBudget"
	obj.apiVersion == "policy/v1"
}

rules["pdb-max-unavailable"] := {"severity": "low", "title": "PodDisruptionBudget maxUnavailable is 0 (or invalid): nodes can never be drained"}

# maxUnavailable as a number (a percentage string gives its number), or "invalid".
int_or_percent(v) := v if is_number(v)

int_or_percent(v) := to_number(trim_suffix(v, "%")) if {
	is_string(v)
	regex.match(`^[0-9]+%$`, v)
}

int_or_percent(v) := "invalid" if {
	is_string(v)
	not regex.match(`^[0-9]+%$`, v)
}

deny contains f if {
	some i, obj in pdbs
	value := object.get(obj, ["spec", "maxUnavailable"], null)
	value != null
	int_or_percent(value) == 0
	f := finding(i, "pdb-max-unavailable", sprintf("%v: maxUnavailable is %v, so no pod may ever be evicted", [resource_name(obj), value]))
}

deny contains f if {
	some i, obj in pdbs
	value := object.get(obj, ["spec", "maxUnavailable"], null)
	value != null
	int_or_percent(value) == "invalid"
	f := finding(i, "pdb-max-unavailable", sprintf("%v: maxUnavailable %v is neither a number nor a percentage", [resource_name(obj), value]))
}

rules["pdb-unhealthy-pod-eviction-policy"] := {"severity": "low", "title": "PodDisruptionBudget does not set unhealthyPodEvictionPolicy"}

deny contains f if {
	some i, obj in pdbs
	object.get(obj, ["spec", "unhealthyPodEvictionPolicy"], null) == null
	f := finding(i, "pdb-unhealthy-pod-eviction-policy", sprintf("%v: sets no spec.unhealthyPodEvictionPolicy (AlwaysAllow lets unhealthy pods be evicted)", [resource_name(obj)]))
}
