# SAMPLE: a managed policy that allows every action on every resource.
resource "aws_iam_policy" "ci" {
  name = "ci-deployer"
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Effect   = "Allow"
        Action   = "*"
        Resource = "*"
      }
    ]
  })
}
