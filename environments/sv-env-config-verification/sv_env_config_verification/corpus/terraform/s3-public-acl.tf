# SAMPLE: a bucket readable by anyone on the internet.
resource "aws_s3_bucket" "assets" {
  bucket = "example-public-assets"
  acl    = "public-read"

  server_side_encryption_configuration {
    rule {
      apply_server_side_encryption_by_default {
        sse_algorithm = "aws:kms"
      }
    }
  }
}
