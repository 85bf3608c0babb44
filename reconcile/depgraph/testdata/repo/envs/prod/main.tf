variable "db_max_conn" {
  default = 400
}

module "db" {
  source   = "../../modules/db"
  max_conn = var.db_max_conn
}

resource "aws_ssm_parameter" "pool" {
  name  = "/prod/api/pool"
  value = module.db.pool_size
}
