# Shared helpers for the Terraform rules. Input: the file's HCL, normalised by Python to
# {"resources": [{"type", "name", "config"}], "data": [{"type", "name", "config"}]}
# (quotes stripped from strings, nested blocks always lists).
package svcv.terraform

import rego.v1

finding(id, r, msg) := {"rule": id, "severity": rules[id].severity, "resource": resource_key(r), "msg": msg}

resource_key(r) := sprintf("data.%v.%v", [r.type, r.name]) if r.mode == "data"

resource_key(r) := sprintf("%v.%v", [r.type, r.name]) if r.mode != "data"

resources_of(t) := [r | some r in object.get(input, "resources", []); r.type == t]

blocks(x) := x if is_array(x)

blocks(x) := [x] if is_object(x)

cfg(r, key, default_value) := object.get(r.config, key, default_value)

world_cidrs := {"0.0.0.0/0", "::/0"}

open_to_world(rule) if {
	some cidr in array.concat(object.get(rule, "cidr_blocks", []), object.get(rule, "ipv6_cidr_blocks", []))
	cidr in world_cidrs
}

covers_port(rule, port) if {
	to_number(rule.from_port) <= port
	port <= to_number(rule.to_port)
}

covers_port(rule, port) if {
	rule.protocol in {"-1", "all"}
}

# Ingress rules from inline `ingress` blocks and from aws_security_group_rule resources.
ingress_rules contains [r, rule] if {
	some r in resources_of("aws_security_group")
	some rule in blocks(cfg(r, "ingress", []))
}

ingress_rules contains [r, r.config] if {
	some r in resources_of("aws_security_group_rule")
	r.config.type == "ingress"
}

ingress_rules contains [r, r.config] if {
	some r in resources_of("aws_vpc_security_group_ingress_rule")
	cidr := object.get(r.config, "cidr_ipv4", object.get(r.config, "cidr_ipv6", ""))
	cidr in world_cidrs
}
