# KubeLinter's default per-container checks, over every container of every pod template.
package svcv.kubelinter

import rego.v1

rules["no-read-only-root-fs"] := {"severity": "medium", "title": "Container's root filesystem is writable (readOnlyRootFilesystem not true)"}

deny contains f if {
	some [i, c] in containers
	object.get(c, ["securityContext", "readOnlyRootFilesystem"], null) != true
	f := finding(i, "no-read-only-root-fs", sprintf("%v: container %v does not set securityContext.readOnlyRootFilesystem: true", [resource_name(docs[i]), container_name(c)]))
}

rules["privileged-container"] := {"severity": "high", "title": "Container runs privileged"}

deny contains f if {
	some [i, c] in containers
	object.get(c, ["securityContext", "privileged"], null) == true
	f := finding(i, "privileged-container", sprintf("%v: container %v sets securityContext.privileged: true", [resource_name(docs[i]), container_name(c)]))
}

rules["privilege-escalation-container"] := {"severity": "high", "title": "Container allows privilege escalation (allowPrivilegeEscalation, privileged or SYS_ADMIN)"}

# KubeLinter flags explicit escalation only (an unset allowPrivilegeEscalation passes here;
# the core OPA rule k8s-allow-privilege-escalation is stricter).
escalation(c) := "sets allowPrivilegeEscalation: true" if object.get(c, ["securityContext", "allowPrivilegeEscalation"], null) == true

escalation(c) := "is privileged, which allows escalation" if {
	object.get(c, ["securityContext", "allowPrivilegeEscalation"], null) != true
	object.get(c, ["securityContext", "privileged"], null) == true
}

escalation(c) := "adds the SYS_ADMIN capability" if {
	object.get(c, ["securityContext", "allowPrivilegeEscalation"], null) != true
	object.get(c, ["securityContext", "privileged"], null) != true
	"SYS_ADMIN" in as_array(object.get(c, ["securityContext", "capabilities", "add"], []))
}

deny contains f if {
	some [i, c] in containers
	reason := escalation(c)
	f := finding(i, "privilege-escalation-container", sprintf("%v: container %v %v", [resource_name(docs[i]), container_name(c), reason]))
}

rules["run-as-non-root"] := {"severity": "medium", "title": "Container may run as root (runAsNonRoot not set, or UID/GID 0)"}

user_is_positive(c, spec) if {
	user := effective(c, spec, "runAsUser")
	is_number(user)
	user > 0
}

deny contains f if {
	some [i, c] in containers
	spec := specs[i]
	effective(c, spec, "runAsGroup") == 0
	f := finding(i, "run-as-non-root", sprintf("%v: container %v runs with runAsGroup 0", [resource_name(docs[i]), container_name(c)]))
}

deny contains f if {
	some [i, c] in containers
	spec := specs[i]
	not user_is_positive(c, spec)
	effective(c, spec, "runAsNonRoot") == true
	effective(c, spec, "runAsUser") == 0
	f := finding(i, "run-as-non-root", sprintf("%v: container %v sets runAsNonRoot but runAsUser 0", [resource_name(docs[i]), container_name(c)]))
}

deny contains f if {
	some [i, c] in containers
	spec := specs[i]
	not user_is_positive(c, spec)
	effective(c, spec, "runAsNonRoot") != true
	f := finding(i, "run-as-non-root", sprintf("%v: container %v sets neither runAsNonRoot: true nor a non-zero runAsUser", [resource_name(docs[i]), container_name(c)]))
}

rules["drop-net-raw-capability"] := {"severity": "medium", "title": "Container adds NET_RAW or does not drop it (when it lists capabilities)"}

# Checked only where the container lists capabilities, as KubeLinter does.
net_raw_or_all(cap) if {
	is_string(cap)
	contains(cap, "NET_RAW")
}

net_raw_or_all(cap) if {
	is_string(cap)
	lower(cap) == "all"
}

deny contains f if {
	some [i, c] in containers
	caps := c.securityContext.capabilities
	is_object(caps)
	some cap in as_array(object.get(caps, "add", []))
	net_raw_or_all(cap)
	f := finding(i, "drop-net-raw-capability", sprintf("%v: container %v adds capability %v", [resource_name(docs[i]), container_name(c), cap]))
}

deny contains f if {
	some [i, c] in containers
	caps := c.securityContext.capabilities
	is_object(caps)
	drops := as_array(object.get(caps, "drop", []))
	not any_net_raw_or_all(drops)
	f := finding(i, "drop-net-raw-capability", sprintf("%v: container %v lists capabilities but does not drop NET_RAW (or ALL)", [resource_name(docs[i]), container_name(c)]))
}

any_net_raw_or_all(caps) if {
	some cap in caps
	net_raw_or_all(cap)
}

rules["latest-tag"] := {"severity": "medium", "title": "Image uses the :latest tag or no tag"}

# KubeLinter's default block list: ":latest", no colon at all, no colon after the last "/".
latest_tag(img) if regex.match(`.*:(latest)$`, img)

latest_tag(img) if regex.match(`^[^:]*$`, img)

latest_tag(img) if regex.match(`(.*/[^:]+)$`, img)

image_of(c) := img if {
	img := c.image
	img != null
} else := ""

deny contains f if {
	some [i, c] in containers
	img := image_of(c)
	is_string(img)
	latest_tag(img)
	f := finding(i, "latest-tag", sprintf("%v: container %v uses image %v (tag :latest or none)", [resource_name(docs[i]), container_name(c), img]))
}

rules["env-var-secret"] := {"severity": "medium", "title": "Secret-looking environment variable holds a literal value"}

deny contains f if {
	some [i, c] in containers
	some e in as_array(object.get(c, "env", []))
	is_string(e.name)
	contains(lower(e.name), "secret")
	value := object.get(e, "value", "")
	value != ""
	value != null
	f := finding(i, "env-var-secret", sprintf("%v: container %v sets %v to a literal value (use a secretKeyRef or a mounted Secret)", [resource_name(docs[i]), container_name(c), e.name]))
}

rules["duplicate-env-var"] := {"severity": "low", "title": "Container sets the same environment variable twice"}

deny contains f if {
	some [i, c] in containers
	names := [n | some e in as_array(object.get(c, "env", [])); n := e.name; is_string(n)]
	some n in {n | some n in names}
	count([x | some x in names; x == n]) > 1
	f := finding(i, "duplicate-env-var", sprintf("%v: container %v sets environment variable %v more than once", [resource_name(docs[i]), container_name(c), n]))
}

rules["ssh-port"] := {"severity": "medium", "title": "Container exposes TCP port 22 (SSH)"}

port_protocol(p) := "TCP" if object.get(p, "protocol", null) in {null, ""}

port_protocol(p) := proto if {
	proto := object.get(p, "protocol", null)
	not proto in {null, ""}
}

deny contains f if {
	some [i, c] in containers
	some p in as_array(object.get(c, "ports", []))
	object.get(p, "containerPort", null) == 22
	port_protocol(p) == "TCP"
	f := finding(i, "ssh-port", sprintf("%v: container %v exposes port 22/TCP", [resource_name(docs[i]), container_name(c)]))
}

rules["unset-cpu-requirements"] := {"severity": "low", "title": "Container sets no CPU request"}

deny contains f if {
	some [i, c] in containers
	zero_quantity(object.get(c, ["resources", "requests", "cpu"], null))
	f := finding(i, "unset-cpu-requirements", sprintf("%v: container %v has no resources.requests.cpu", [resource_name(docs[i]), container_name(c)]))
}

rules["unset-memory-requirements"] := {"severity": "low", "title": "Container sets no memory limit"}

deny contains f if {
	some [i, c] in containers
	zero_quantity(object.get(c, ["resources", "limits", "memory"], null))
	f := finding(i, "unset-memory-requirements", sprintf("%v: container %v has no resources.limits.memory", [resource_name(docs[i]), container_name(c)]))
}

# --- probes must point at a port the container exposes (regular containers only) ----------

rules["liveness-port"] := {"severity": "low", "title": "Liveness probe targets a port the container does not expose"}

rules["readiness-port"] := {"severity": "low", "title": "Readiness probe targets a port the container does not expose"}

rules["startup-port"] := {"severity": "low", "title": "Startup probe targets a port the container does not expose"}

probe_checks := {"livenessProbe": "liveness-port", "readinessProbe": "readiness-port", "startupProbe": "startup-port"}

# Ports a probe may use: TCP ports, by number and by name.
tcp_ports(c) := [p | some p in as_array(object.get(c, "ports", [])); is_object(p); port_protocol(p) == "TCP"]

port_exposed(port, c) if {
	is_number(port)
	some p in tcp_ports(c)
	p.containerPort == port
}

port_exposed(port, c) if {
	is_string(port)
	some p in tcp_ports(c)
	object.get(p, "name", "") == port
}

deny contains f if {
	some i, spec in specs
	some c in regular_containers(spec)
	some key, id in probe_checks
	probe := c[key]
	is_object(probe)
	some handler in ["httpGet", "tcpSocket", "grpc"]
	port := probe[handler].port
	not port_exposed(port, c)
	f := finding(i, id, sprintf("%v: container %v %v.%v uses port %v, which the container does not expose", [resource_name(docs[i]), container_name(c), key, handler, port]))
}

rules["invalid-target-ports"] := {"severity": "low", "title": "Port name or Service targetPort is not a valid port name/number"}

deny contains f if {
	some [i, c] in containers
	some p in as_array(object.get(c, "ports", []))
	port_name := object.get(p, "name", "")
	port_name != ""
	not valid_port_name(port_name)
	f := finding(i, "invalid-target-ports", sprintf("%v: container %v port name %v is not a valid port name (1-15 of a-z, 0-9, -; a letter; no edge or double -)", [resource_name(docs[i]), container_name(c), port_name]))
}
