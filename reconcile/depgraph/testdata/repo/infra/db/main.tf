variable "max_connections" {
  description = "Connections the database accepts."
  type        = number
  default     = 200
}

resource "aws_db_parameter_group" "main" {
  name   = "api-db"
  family = "postgres16"

  parameter {
    name  = "max_connections"
    value = var.max_connections
  }
}

resource "aws_db_instance" "main" {
  identifier           = "api"
  instance_class       = "db.r6g.large"
  parameter_group_name = aws_db_parameter_group.main.name
}

resource "kubernetes_config_map" "api" {
  metadata {
    name      = "db-pool"
    namespace = "prod"
  }
  data = {
    POOL_MAX = floor(var.max_connections / 4)
    HOST     = aws_db_instance.main.address
  }
}

resource "aws_cloudwatch_metric_alarm" "connections" {
  alarm_name = "api-db-connections"
  threshold  = var.max_connections * 0.9
  depends_on = [aws_db_instance.main]
}
