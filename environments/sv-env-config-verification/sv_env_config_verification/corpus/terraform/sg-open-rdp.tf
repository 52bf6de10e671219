# SAMPLE: RDP opened to the world through a standalone rule.
resource "aws_security_group" "windows" {
  name   = "windows-hosts"
  vpc_id = "vpc-0123456789abcdef0"
}

resource "aws_security_group_rule" "rdp" {
  type              = "ingress"
  from_port         = 3389
  to_port           = 3389
  protocol          = "tcp"
  cidr_blocks       = ["0.0.0.0/0"]
  security_group_id = aws_security_group.windows.id
}
