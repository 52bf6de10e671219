# SAMPLE: a private bucket with no default encryption.
resource "aws_s3_bucket" "logs" {
  bucket = "example-access-logs"
}

resource "aws_s3_bucket_acl" "logs" {
  bucket = aws_s3_bucket.logs.id
  acl    = "private"
}
