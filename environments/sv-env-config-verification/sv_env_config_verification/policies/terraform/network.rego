package svcv.terraform

import rego.v1

rules["tf-sg-open-ssh"] := {"severity": "high", "title": "Security group allows SSH (22) from the internet"}

rules["tf-sg-open-rdp"] := {"severity": "high", "title": "Security group allows RDP (3389) from the internet"}

admin_ports := {"tf-sg-open-ssh": 22, "tf-sg-open-rdp": 3389}

deny contains f if {
	some [r, rule] in ingress_rules
	open_to_world(rule)
	some id, port in admin_ports
	covers_port(rule, port)
	f := finding(id, r, sprintf("%v.%v: ingress on port %v open to the internet", [r.type, r.name, port]))
}
