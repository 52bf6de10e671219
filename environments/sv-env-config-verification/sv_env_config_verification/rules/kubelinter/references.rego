# KubeLinter's default cross-object checks, across the documents of one file.
#
# KubeLinter relates every object of one lint run, so linting a file alone flags a Service
# whose pods live in another file. Here a reference is judged only when the file holds the
# kind of object it refers to: a Service only when the file has some pod template, a pod's
# service account only when the file defines some ServiceAccount, a PodDisruptionBudget's
# replica check only against the workloads in the file. A lone Service (or a Deployment
# naming an account defined elsewhere) is therefore not a finding: nothing in the file
# shows that it is wrong.
package svcv.kubelinter

import rego.v1

rules["dangling-service"] := {"severity": "low", "title": "Service selects none of the pod templates in the file"}

has_pod_templates if {
	some obj in workloads
}

services[i] := obj if {
	some i, obj in docs
	obj.kind == "Service"
	object.get(obj, ["spec", "type"], "") != "ExternalName"
}

service_selector(svc) := as_object(object.get(svc, ["spec", "selector"], {}))

selects_a_pod(svc, sel) if {
	some obj in workloads
	namespace_of(obj) == namespace_of(svc)
	map_selector_matches(sel, template_labels(obj))
}

deny contains f if {
	has_pod_templates
	some i, svc in services
	sel := service_selector(svc)
	count(sel) > 0
	not selects_a_pod(svc, sel)
	f := finding(i, "dangling-service", sprintf("%v: selector %v matches no pod template in this file", [resource_name(svc), sel]))
}

# A Service without a selector needs Endpoints (or an EndpointSlice) written for it.
has_endpoints(svc) if {
	some e in docs
	e.kind == "Endpoints"
	name_of(e) == name_of(svc)
	namespace_of(e) == namespace_of(svc)
}

has_endpoints(svc) if {
	some e in docs
	e.kind == "EndpointSlice"
	object.get(e, ["metadata", "labels", "kubernetes.io/service-name"], null) == name_of(svc)
	namespace_of(e) == namespace_of(svc)
}

deny contains f if {
	has_pod_templates
	some i, svc in services
	count(service_selector(svc)) == 0
	not has_endpoints(svc)
	f := finding(i, "dangling-service", sprintf("%v: has no selector and no Endpoints in this file", [resource_name(svc)]))
}

rules["non-existent-service-account"] := {"severity": "low", "title": "Pod uses a service account the file does not define"}

service_accounts contains [namespace_of(obj), name_of(obj)] if {
	some obj in docs
	obj.kind == "ServiceAccount"
}

pod_service_account(spec) := account if {
	account := object.get(spec, "serviceAccountName", "")
	not account in {"", null}
} else := account if {
	account := object.get(spec, "serviceAccount", "")
	account != null
} else := ""

deny contains f if {
	count(service_accounts) > 0
	some i, obj in workloads
	account := pod_service_account(specs[i])
	not account in {"", "default"}
	not [namespace_of(obj), account] in service_accounts
	f := finding(i, "non-existent-service-account", sprintf("%v: service account %v is not among the ServiceAccounts this file defines", [resource_name(obj), account]))
}

rules["pdb-min-available"] := {"severity": "low", "title": "PodDisruptionBudget minAvailable leaves no pod evictable (or is invalid)"}

# minAvailable as {"value", "percent"}, or "invalid".
min_available(v) := {"value": v, "percent": false} if is_number(v)

min_available(v) := {"value": to_number(v), "percent": false} if {
	is_string(v)
	regex.match(`^[0-9]+$`, v)
}

min_available(v) := {"value": to_number(trim_suffix(v, "%")), "percent": true} if {
	is_string(v)
	regex.match(`^[0-9]+%$`, v)
}

min_available(v) := "invalid" if {
	is_string(v)
	not regex.match(`^[0-9]+%?$`, v)
}

pdb_minimum(i) := m if {
	value := object.get(pdbs[i], ["spec", "minAvailable"], null)
	value != null
	m := min_available(value)
}

deny contains f if {
	some i, pdb in pdbs
	pdb_minimum(i) == "invalid"
	f := finding(i, "pdb-min-available", sprintf("%v: minAvailable %v is neither a number nor a percentage", [resource_name(pdb), pdb.spec.minAvailable]))
}

deny contains f if {
	some i, pdb in pdbs
	pdb_minimum(i) == {"value": 100, "percent": true}
	f := finding(i, "pdb-min-available", sprintf("%v: minAvailable is 100%%, so no pod may ever be evicted", [resource_name(pdb)]))
}

deny contains f if {
	some i, pdb in pdbs
	is_object(pdb_minimum(i))
	not is_object(object.get(pdb, ["spec", "selector"], null))
	f := finding(i, "pdb-min-available", sprintf("%v: sets minAvailable but no spec.selector", [resource_name(pdb)]))
}

# A workload's replicas, or its HorizontalPodAutoscaler's minReplicas when it leaves the
# count at 1 (KubeLinter's rule).
min_replicas_of(obj) := ms[0] if {
	replicas(obj) == 1
	ms := [m |
		some h in docs
		h.kind == "HorizontalPodAutoscaler"
		namespace_of(h) == namespace_of(obj)
		object.get(h, ["spec", "scaleTargetRef", "name"], null) == name_of(obj)
		m := h.spec.minReplicas
		is_number(m)
	]
	count(ms) > 0
} else := replicas(obj)

deny contains f if {
	some i, pdb in pdbs
	minimum := pdb_minimum(i)
	is_object(minimum)
	selector := pdb.spec.selector
	is_object(selector)
	some obj in workloads
	obj.kind in {"Deployment", "StatefulSet", "ReplicaSet"}
	namespace_of(obj) == namespace_of(pdb)
	selector_matches(selector, as_object(object.get(obj, ["spec", "selector", "matchLabels"], {})))
	n := min_replicas_of(obj)
	is_number(n)
	required := pdb_required(minimum, n)
	n <= required
	f := finding(i, "pdb-min-available", sprintf("%v: %v has %v replicas, not more than minAvailable %v", [resource_name(pdb), resource_name(obj), n, required]))
}

pdb_required(minimum, _) := minimum.value if minimum.percent == false

pdb_required(minimum, n) := ceil((n * minimum.value) / 100) if minimum.percent == true
