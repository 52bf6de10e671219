# SAMPLE (clean): encrypted volume and database, and a scoped IAM policy.
resource "aws_ebs_volume" "data" {
  availability_zone = "eu-west-1a"
  size              = 100
  encrypted         = true
}

resource "aws_db_instance" "billing" {
  identifier        = "billing"
  engine            = "postgres"
  instance_class    = "db.t3.medium"
  allocated_storage = 20
  username          = "billing"
  password          = var.db_password
  storage_encrypted = true
}

variable "db_password" {
  type      = string
  sensitive = true
}

resource "aws_iam_policy" "reader" {
  name = "reports-reader"
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Effect   = "Allow"
        Action   = ["s3:GetObject", "s3:ListBucket"]
        Resource = ["arn:aws:s3:::example-reports", "arn:aws:s3:::example-reports/*"]
      }
    ]
  })
}
