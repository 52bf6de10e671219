package svcv.terraform

import rego.v1

rules["tf-s3-public-acl"] := {"severity": "high", "title": "S3 bucket ACL grants public access"}

public_acls := {"public-read", "public-read-write", "authenticated-read"}

deny contains f if {
	some t in ["aws_s3_bucket", "aws_s3_bucket_acl"]
	some r in resources_of(t)
	cfg(r, "acl", "private") in public_acls
	f := finding("tf-s3-public-acl", r, sprintf("%v.%v: acl = %v", [r.type, r.name, r.config.acl]))
}

rules["tf-s3-public-access-block-disabled"] := {"severity": "high", "title": "S3 public access block does not block public access"}

deny contains f if {
	some r in resources_of("aws_s3_bucket_public_access_block")
	some key in ["block_public_acls", "block_public_policy", "ignore_public_acls", "restrict_public_buckets"]
	cfg(r, key, false) != true
	f := finding("tf-s3-public-access-block-disabled", r, sprintf("%v.%v: %v is not true", [r.type, r.name, key]))
}

rules["tf-s3-unencrypted"] := {"severity": "medium", "title": "S3 bucket has no default server-side encryption"}

# Simplification: any aws_s3_bucket_server_side_encryption_configuration in the same file
# counts as covering its buckets (references are not resolved).
deny contains f if {
	some r in resources_of("aws_s3_bucket")
	cfg(r, "server_side_encryption_configuration", null) == null
	count(resources_of("aws_s3_bucket_server_side_encryption_configuration")) == 0
	f := finding("tf-s3-unencrypted", r, sprintf("%v.%v: no server-side encryption configuration", [r.type, r.name]))
}
