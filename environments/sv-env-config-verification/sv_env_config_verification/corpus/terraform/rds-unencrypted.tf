# SAMPLE: a database with encryption at rest turned off.
resource "aws_db_instance" "orders" {
  identifier          = "orders"
  engine              = "postgres"
  engine_version      = "16.2"
  instance_class      = "db.t3.medium"
  allocated_storage   = 50
  username            = "orders"
  password            = var.db_password
  storage_encrypted   = false
  skip_final_snapshot = true
}

variable "db_password" {
  type      = string
  sensitive = true
}
