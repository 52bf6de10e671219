# SAMPLE: a policy document with a wildcard action, attached as an inline role policy.
data "aws_iam_policy_document" "lambda" {
  statement {
    effect    = "Allow"
    actions   = ["*"]
    resources = ["*"]
  }
}

resource "aws_iam_role_policy" "lambda" {
  name   = "lambda-inline"
  role   = "lambda-exec"
  policy = data.aws_iam_policy_document.lambda.json
}
