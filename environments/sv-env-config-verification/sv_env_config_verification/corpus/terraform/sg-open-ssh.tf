# SAMPLE: SSH reachable from the whole internet.
resource "aws_security_group" "bastion" {
  name        = "bastion"
  description = "bastion host"
  vpc_id      = "vpc-0123456789abcdef0"

  ingress {
    description = "ssh"
    from_port   = 22
    to_port     = 22
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }

  egress {
    from_port   = 0
    to_port     = 0
    protocol    = "-1"
    cidr_blocks = ["0.0.0.0/0"]
  }
}
