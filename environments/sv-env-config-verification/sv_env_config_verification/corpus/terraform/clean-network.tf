# SAMPLE (clean): HTTPS from anywhere, SSH only from the internal network.
resource "aws_security_group" "web" {
  name   = "web"
  vpc_id = "vpc-0123456789abcdef0"

  ingress {
    description = "https"
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }

  ingress {
    description = "ssh from the office network"
    from_port   = 22
    to_port     = 22
    protocol    = "tcp"
    cidr_blocks = ["10.0.0.0/8"]
  }
}
