variable "max_conn" {
  type    = number
  default = 200
}
