# The Kafka consumer fleet of the parley demo, plus one of each resource the CloudTrail mappings know.
resource "aws_autoscaling_group" "consumer" {
  name             = "kafka-consumer"
  min_size         = 4
  max_size         = 16
  desired_capacity = 4

  tag {
    key                 = "team"
    value               = "streaming"
    propagate_at_launch = true
  }
  tag {
    key                 = "cost-center"
    value               = "cc-42"
    propagate_at_launch = false
  }
}

resource "aws_cloudwatch_metric_alarm" "lag" {
  alarm_name          = "kafka-consumer-lag"
  comparison_operator = "GreaterThanThreshold"
  evaluation_periods  = 3
  metric_name         = "SumOffsetLag"
  namespace           = "AWS/Kafka"
  period              = 60
  statistic           = "Maximum"
  threshold           = 10000
  dimensions = {
    ConsumerGroup = "billing"
  }
}

resource "aws_db_instance" "orders" {
  identifier        = "orders-db"
  instance_class    = "db.r6g.large"
  allocated_storage = 200
}

resource "aws_lambda_function" "resize" {
  function_name = "image-resize"
  memory_size   = 512
  timeout       = 30
  environment {
    variables = {
      QUALITY = "80"
    }
  }
}

resource "aws_ecs_service" "api" {
  name          = "api"
  cluster       = aws_ecs_cluster.main.id
  desired_count = 3
}

resource "aws_dynamodb_table" "sessions" {
  name           = "sessions"
  billing_mode   = "PROVISIONED"
  read_capacity  = 20
  write_capacity = 10
}

resource "aws_s3_bucket_versioning" "logs" {
  bucket = "acme-logs"
  versioning_configuration {
    status = "Suspended"
  }
}

resource "aws_iam_role_policy" "consumer" {
  name   = "kafka-consumer-read"
  role   = aws_iam_role.consumer.id
  policy = jsonencode({ Version = "2012-10-17", Statement = [] })
}
