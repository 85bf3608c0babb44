locals {
  pool = floor(var.max_conn / 4)
  cfg = {
    pool    = local.pool
    timeout = 30
  }
}

resource "aws_db_parameter_group" "this" {
  name = "db"
  parameter {
    name  = "max_connections"
    value = var.max_conn
  }
}

output "pool_size" {
  value = local.cfg.pool
}

output "timeout" {
  value = local.cfg.timeout
}
