package svcv.terraform

import rego.v1

rules["tf-ebs-unencrypted"] := {"severity": "medium", "title": "EBS volume is not encrypted"}

deny contains f if {
	some r in resources_of("aws_ebs_volume")
	cfg(r, "encrypted", false) != true
	f := finding("tf-ebs-unencrypted", r, sprintf("%v.%v: encrypted is not true", [r.type, r.name]))
}

rules["tf-rds-unencrypted"] := {"severity": "high", "title": "RDS storage is not encrypted at rest"}

deny contains f if {
	some t in ["aws_db_instance", "aws_rds_cluster"]
	some r in resources_of(t)
	cfg(r, "storage_encrypted", false) != true
	f := finding("tf-rds-unencrypted", r, sprintf("%v.%v: storage_encrypted is not true", [r.type, r.name]))
}
