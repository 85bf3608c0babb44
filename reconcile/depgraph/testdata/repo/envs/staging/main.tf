module "db" {
  source   = "../../modules/db"
  max_conn = 100
}

resource "aws_ssm_parameter" "pool" {
  name  = "/staging/api/pool"
  value = module.db.pool_size
}
