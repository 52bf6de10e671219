# SAMPLE: every port open to the internet, and an unencrypted volume.
resource "aws_security_group" "app" {
  name   = "app"
  vpc_id = "vpc-0123456789abcdef0"

  ingress {
    from_port   = 0
    to_port     = 65535
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }
}

resource "aws_ebs_volume" "scratch" {
  availability_zone = "eu-west-1b"
  size              = 20
  encrypted         = false
}
