# Helpers for the project's Rego versions of KubeLinter's default checks.
#
# Input: the WHOLE file, {"documents": [<parsed YAML document>, ...]}, so a check can relate
# objects across documents (a Service to the pod templates it should select). Every rule
# registers itself in `rules` (id -> severity, title) and adds findings to `deny`; a
# finding's `doc` is the index of the document it is about (Python maps it to a line and
# the rule id to its severity in `rules`).
# Rule ids are KubeLinter's check names. Unlike KubeLinter, the
# `ignore-check.kube-linter.io/*` annotations are not honoured: a patch could otherwise
# silence a finding instead of fixing it.
package svcv.kubelinter

import rego.v1

# Objects with `spec.template` (KubeLinter's "DeploymentLike", minus Pod and CronJob which
# keep their pod spec elsewhere).
templated_kinds := {
	"Deployment", "DaemonSet", "StatefulSet", "ReplicaSet",
	"ReplicationController", "Job", "DeploymentConfig",
}

# Kinds with a replica count (default 1 when unset).
replicated_kinds := {"Deployment", "StatefulSet", "ReplicaSet", "ReplicationController", "DeploymentConfig"}

as_object(x) := x if is_object(x) else := {}

as_array(x) := x if is_array(x) else := []

# Every Kubernetes object in the file, by document index.
docs[i] := obj if {
	some i, obj in input.documents
	is_object(obj)
	is_string(obj.kind)
}

pod_template(obj) := t if {
	obj.kind in templated_kinds
	t := obj.spec.template
	is_object(t)
}

pod_template(obj) := t if {
	obj.kind == "CronJob"
	t := obj.spec.jobTemplate.spec.template
	is_object(t)
}

pod_template(obj) := {"metadata": as_object(object.get(obj, "metadata", {})), "spec": obj.spec} if obj.kind == "Pod"

pod_spec(obj) := s if {
	s := pod_template(obj).spec
	is_object(s)
}

template_labels(obj) := as_object(object.get(as_object(object.get(pod_template(obj), "metadata", {})), "labels", {}))

# Pod specs and the objects that carry them, by document index. Rules iterate these (and
# `containers`) rather than calling the functions again: regopy does not memoise function
# calls, and re-deriving every container per rule made a file cost ~10x more.
specs[i] := s if {
	some i, obj in docs
	s := pod_spec(obj)
}

workloads[i] := docs[i] if specs[i]

# [document index, container] for init, regular and ephemeral containers (KubeLinter's
# AllContainers).
containers contains [i, c] if {
	some i, spec in specs
	some key in ["initContainers", "containers", "ephemeralContainers"]
	some c in as_array(object.get(spec, key, []))
	is_object(c)
}

all_containers(spec) := [c | some key in ["initContainers", "containers", "ephemeralContainers"]; some c in as_array(object.get(spec, key, [])); is_object(c)]

regular_containers(spec) := [c | some c in as_array(object.get(spec, "containers", [])); is_object(c)]

# Text for messages. Never feed sprintf a string default of object.get: regopy 1.5.2 then
# prints it quoted and unescaped, and the query's JSON output no longer parses.
name_of(obj) := n if {
	n := obj.metadata.name
	n != null
} else := "?"

namespace_of(obj) := ns if {
	ns := object.get(obj, ["metadata", "namespace"], "")
	ns != null
} else := ""

resource_name(obj) := sprintf("%v/%v", [obj.kind, name_of(obj)])

container_name(c) := n if {
	n := c.name
	n != null
} else := "?"

# The container's own securityContext value for `key` when set, else the pod's, else null.
effective(c, spec, key) := v if {
	v := c.securityContext[key]
	v != null
} else := v if {
	v := spec.securityContext[key]
	v != null
} else := null

# A finding about document `i`; Python turns it into Finding(tool="kubelinter_rego", ...)
# and takes the severity from `rules` (looking it up here cost ~5 ms a finding).
finding(i, id, msg) := {"rule": id, "msg": msg, "doc": i}

# --- label selectors (Kubernetes semantics) -------------------------------------------

# A LabelSelector {matchLabels, matchExpressions} against a label map. A missing (non-object)
# selector matches nothing; an empty one matches everything, as in Kubernetes.
selector_matches(sel, labels) if {
	is_object(sel)
	every k, v in as_object(object.get(sel, "matchLabels", {})) {
		labels[k] == v
	}
	every e in as_array(object.get(sel, "matchExpressions", [])) {
		expression_matches(e, labels)
	}
}

selector_empty(sel) if not is_object(sel)

selector_empty(sel) if {
	is_object(sel)
	count(as_object(object.get(sel, "matchLabels", {}))) == 0
	count(as_array(object.get(sel, "matchExpressions", []))) == 0
}

has_label(labels, key) if labels[key] != null

expression_matches(e, labels) if {
	e.operator == "In"
	labels[e.key] in as_array(e.values)
}

expression_matches(e, labels) if {
	e.operator == "NotIn"
	not labels[e.key] in as_array(e.values)
}

expression_matches(e, labels) if {
	e.operator == "Exists"
	has_label(labels, e.key)
}

expression_matches(e, labels) if {
	e.operator == "DoesNotExist"
	not has_label(labels, e.key)
}

# A plain label map selector (Service.spec.selector): every pair present; never empty.
map_selector_matches(sel, labels) if {
	count(sel) > 0
	every k, v in sel {
		labels[k] == v
	}
}

# --- values ---------------------------------------------------------------------------

# An IANA service name as Kubernetes validates port names: 1-15 characters of [a-z0-9-],
# at least one letter, no leading, trailing or doubled hyphen.
valid_port_name(n) if {
	is_string(n)
	count(n) >= 1
	count(n) <= 15
	regex.match(`^[-a-z0-9]+$`, n)
	regex.match(`[a-z]`, n)
	not contains(n, "--")
	not startswith(n, "-")
	not endswith(n, "-")
}

# A resource quantity that is unset or zero ("0", "0m", "0Mi", 0).
zero_quantity(q) if q == null

zero_quantity(q) if q == ""

zero_quantity(q) if {
	is_number(q)
	q == 0
}

zero_quantity(q) if {
	is_string(q)
	regex.match(`^\+?0*\.?0*[a-zA-Z]{0,2}$`, q)
}

# "group/version" -> [group, version]; a bare "v1" is the core group "".
group_version(api) := [parts[0], parts[1]] if {
	parts := split(api, "/")
	count(parts) == 2
} else := ["", api]
