package events

import (
	"slices"
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
)

func testTFIndex(t testing.TB) *TFIndex {
	t.Helper()
	ix, err := TFIndexFromFiles(map[string][]byte{
		"infra/kafka/main.tf": readTestdata(t, "cloudtrail", "infra", "kafka", "main.tf"),
		"README.md":           []byte("not terraform"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func TestDecodeCloudTrailRecords(t *testing.T) {
	b, err := DecodeCloudTrail(readTestdata(t, "cloudtrail", "records.json"), testTFIndex(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"tf:infra/kafka//aws_cloudwatch_metric_alarm.lag#/threshold = 25000 by aws-principal:arn:aws:iam::123456789012:role/scaling-agent [aws-cli] intent=availability motivation=incident INC-4211 severity=high expires=2026-11-22T10:11:01Z restated",
		"tf:infra/kafka//aws_cloudwatch_metric_alarm.lag#/evaluation_periods = 5 by aws-principal:arn:aws:iam::123456789012:role/scaling-agent [aws-cli] intent=availability motivation=incident INC-4211 severity=high expires=2026-11-22T10:11:01Z restated",
		"tf:infra/kafka//aws_cloudwatch_metric_alarm.lag#/period = 60 by aws-principal:arn:aws:iam::123456789012:role/scaling-agent [aws-cli] intent=availability motivation=incident INC-4211 severity=high expires=2026-11-22T10:11:01Z restated",
		"tf:infra/kafka//aws_cloudwatch_metric_alarm.lag#/comparison_operator = \"GreaterThanThreshold\" by aws-principal:arn:aws:iam::123456789012:role/scaling-agent [aws-cli] intent=availability motivation=incident INC-4211 severity=high expires=2026-11-22T10:11:01Z restated",
		"tf:infra/kafka//aws_cloudwatch_metric_alarm.lag#/statistic = \"Maximum\" by aws-principal:arn:aws:iam::123456789012:role/scaling-agent [aws-cli] intent=availability motivation=incident INC-4211 severity=high expires=2026-11-22T10:11:01Z restated",
		"tf:infra/kafka//aws_cloudwatch_metric_alarm.lag#/metric_name = \"SumOffsetLag\" by aws-principal:arn:aws:iam::123456789012:role/scaling-agent [aws-cli] intent=availability motivation=incident INC-4211 severity=high expires=2026-11-22T10:11:01Z restated",
		"tf:infra/kafka//aws_cloudwatch_metric_alarm.lag#/namespace = \"AWS/Kafka\" by aws-principal:arn:aws:iam::123456789012:role/scaling-agent [aws-cli] intent=availability motivation=incident INC-4211 severity=high expires=2026-11-22T10:11:01Z restated",
		"tf:infra/kafka//aws_cloudwatch_metric_alarm.lag#/dimensions/ConsumerGroup = \"billing\" by aws-principal:arn:aws:iam::123456789012:role/scaling-agent [aws-cli] intent=availability motivation=incident INC-4211 severity=high expires=2026-11-22T10:11:01Z restated",
		"tf:infra/kafka//aws_autoscaling_group.consumer#/min_size = 4 by aws-principal:arn:aws:iam::123456789012:user/alice [aws-cli]",
		"tf:infra/kafka//aws_autoscaling_group.consumer#/max_size = 24 by aws-principal:arn:aws:iam::123456789012:user/alice [aws-cli]",
		"tf:infra/kafka//aws_autoscaling_group.consumer#/vpc_zone_identifier = [\"subnet-0a1b\",\"subnet-2c3d\"] by aws-principal:arn:aws:iam::123456789012:user/alice [aws-cli]",
		"tf:infra/kafka//aws_autoscaling_group.consumer#/tag/1/key = \"cost-center\" by aws-principal:arn:aws:iam::123456789012:user/alice [aws-cli] intent=cost",
		"tf:infra/kafka//aws_autoscaling_group.consumer#/tag/1/value = \"cc-77\" by aws-principal:arn:aws:iam::123456789012:user/alice [aws-cli] intent=cost",
		"tf:infra/kafka//aws_autoscaling_group.consumer#/tag/1/propagate_at_launch = false by aws-principal:arn:aws:iam::123456789012:user/alice [aws-cli] intent=cost",
		"tf:infra/kafka//aws_autoscaling_group.consumer#/tag/2/key = \"oncall\" by aws-principal:arn:aws:iam::123456789012:user/alice [aws-cli] intent=cost",
		"tf:infra/kafka//aws_autoscaling_group.consumer#/tag/2/value = \"streaming-oncall\" by aws-principal:arn:aws:iam::123456789012:user/alice [aws-cli] intent=cost",
		"tf:infra/kafka//aws_autoscaling_group.consumer#/tag/2/propagate_at_launch = true by aws-principal:arn:aws:iam::123456789012:user/alice [aws-cli] intent=cost",
		"tf:infra/kafka//aws_db_instance.orders#/allocated_storage = 400 by aws-principal:arn:aws:iam::123456789012:user/alice [aws-cli]",
		"tf:infra/kafka//aws_db_instance.orders#/instance_class = \"db.r6g.xlarge\" by aws-principal:arn:aws:iam::123456789012:user/alice [aws-cli]",
		"tf:infra/kafka//aws_lambda_function.resize#/memory_size = 1024 by aws-principal:arn:aws:iam::123456789012:role/scaling-agent [aws-cli]",
		"tf:infra/kafka//aws_lambda_function.resize#/timeout = 60 by aws-principal:arn:aws:iam::123456789012:role/scaling-agent [aws-cli]",
		"tf:infra/kafka//aws_lambda_function.resize#/environment/0/variables/QUALITY = \"70\" by aws-principal:arn:aws:iam::123456789012:role/scaling-agent [aws-cli]",
		"tf:infra/kafka//aws_ecs_service.api#/desired_count = 6 by aws-principal:arn:aws:iam::123456789012:role/scaling-agent [aws-cli]",
		"tf:infra/kafka//aws_dynamodb_table.sessions#/read_capacity = 50 by aws-principal:arn:aws:iam::123456789012:role/scaling-agent [aws-cli]",
		"tf:infra/kafka//aws_dynamodb_table.sessions#/write_capacity = 25 by aws-principal:arn:aws:iam::123456789012:role/scaling-agent [aws-cli]",
		"tf:infra/kafka//aws_s3_bucket_versioning.logs#/versioning_configuration/0/status = \"Enabled\" by aws-principal:arn:aws:iam::123456789012:user/alice [aws-cli]",
		"tf:infra/kafka//aws_iam_role_policy.consumer#/policy = \"{\\\"Version\\\":\\\"2012-10-17\\\",\\\"Statement\\\":[{\\\"Effect\\\":\\\"Allow\\\",\\\"Action\\\":\\\"*\\\",\\\"Resource\\\":\\\"*\\\"}]}\" by aws-principal:arn:aws:iam::123456789012:role/scaling-agent [aws-cli]",
		"tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity = 12 by aws-principal:autoscaling.amazonaws.com [autoscaling.amazonaws.com]",
	}
	if got := obsLines(b); !slices.Equal(got, want) {
		t.Errorf("observations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// ModifyInstanceAttribute (instance IDs are not in .tf files) and the unknown batch-workers group.
	if got, want := ignoredString(b.Ignored), "error-code=1 not-in-terraform=2 read-only=1 unknown-api-call=1"; got != want {
		t.Errorf("ignored = %s, want %s", got, want)
	}
	if len(b.EventIDs) != 10 {
		t.Errorf("%d event IDs, want 10: %v", len(b.EventIDs), b.EventIDs)
	}
	agent := b.Observations[0].Identity
	if agent.Name != "arn:aws:sts::123456789012:assumed-role/scaling-agent/scaling-agent-1732097400" {
		t.Errorf("assumed role session kept as %q", agent.Name)
	}
}

func TestDecodeCloudTrailEnvelopes(t *testing.T) {
	ix := testTFIndex(t)
	cases := []struct {
		file, want, id string
	}{
		{"eventbridge-set-desired-capacity.json", "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity = 9 by aws-principal:arn:aws:iam::123456789012:role/scaling-agent [Boto3]",
			"a1b2c3d4-0001-4b5c-9d8e-0f1a2b3c4d5e"},
		{"raw-record.json", "tf:infra/kafka//aws_autoscaling_group.consumer#/desired_capacity = 6 by aws-principal:arn:aws:iam::123456789012:user/alice [aws-cli]",
			"a1b2c3d4-0116-4b5c-9d8e-0f1a2b3c4d5e"},
	}
	for _, c := range cases {
		b, err := DecodeCloudTrail(readTestdata(t, "cloudtrail", c.file), ix)
		if err != nil {
			t.Fatal(err)
		}
		if got := obsLines(b); len(got) != 1 || got[0] != c.want || b.Observations[0].EventID != c.id || !slices.Equal(b.EventIDs, []string{c.id}) {
			t.Errorf("%s: %v %v, want %s with ID %s", c.file, got, b.EventIDs, c.want, c.id)
		}
	}
	b, err := DecodeCloudTrail([]byte(`{"detail-type":"EC2 Instance State-change Notification","detail":{"state":"running"}}`), ix)
	if err != nil || ignoredString(b.Ignored) != "eventbridge-other-detail-type=1" {
		t.Errorf("other detail type: %v %v", b.Ignored, err)
	}
	b, err = DecodeCloudTrail(readTestdata(t, "cloudtrail", "raw-record.json"), nil)
	if err != nil || ignoredString(b.Ignored) != "not-in-terraform=1" {
		t.Errorf("nil index: %v %v", b.Ignored, err)
	}
}

func TestDecodeCloudTrailErrors(t *testing.T) {
	cases := []struct{ body, want string }{
		{`{"Records": [{"eventName": "SetDesiredCapacity",}]}`, "invalid JSON at byte"},
		{`{"Records": [{"eventName": "SetDesiredCapacity"}]}`, "record 0 has no eventSource"},
		{`{"hello": "world"}`, "neither a CloudTrail record"},
		{`{"detail-type": "AWS API Call via CloudTrail"}`, "no detail"},
		{`{"eventID": "e", "eventSource": "autoscaling.amazonaws.com", "eventName": "SetDesiredCapacity", "eventTime": "noon", "requestParameters": {}}`, "eventTime"},
		{`{"Records": [{"eventID": "e", "eventSource": "s", "eventName": "n", "readOnly": "yes"}]}`, "readOnly"},
	}
	for _, c := range cases {
		_, err := DecodeCloudTrail([]byte(c.body), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DecodeCloudTrail(%q) error = %v, want it to mention %q", c.body, err, c.want)
		}
	}
}

func TestTFIndex(t *testing.T) {
	ix := testTFIndex(t)
	f, ok := ix.FindResource("aws_autoscaling_group", "name", core.StringValue("kafka-consumer"))
	if !ok || f.String() != "tf:infra/kafka//aws_autoscaling_group.consumer" {
		t.Errorf("FindResource = %v, %v", f, ok)
	}
	if _, ok := ix.FindResource("aws_autoscaling_group", "name", core.StringValue("nope")); ok {
		t.Errorf("found a group that does not exist")
	}
	if _, ok := ix.FindResource("aws_iam_role_policy", "role", core.StringValue("aws_iam_role.consumer.id")); ok {
		t.Errorf("matched an expression as if it were a literal")
	}
	// Two resources with one name: refuse to guess.
	two := []byte(`resource "aws_sqs_queue" "a" { name = "q" }` + "\n" + `resource "aws_sqs_queue" "b" { name = "q" }` + "\n")
	ix2, err := TFIndexFromFiles(map[string][]byte{"main.tf": two})
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := ix2.FindResource("aws_sqs_queue", "name", core.StringValue("q")); ok {
		t.Errorf("ambiguous name found %s", f)
	}
	if _, err := TFIndexFromFiles(map[string][]byte{"bad/main.tf": []byte("resource \"x\" {")}); err == nil || !strings.Contains(err.Error(), "bad/main.tf") {
		t.Errorf("parse error = %v, want it to name the file", err)
	}
}

func TestCTKey(t *testing.T) {
	for in, want := range map[string]string{
		"UpdateFunctionConfiguration20150331v2": "s UpdateFunctionConfiguration",
		"PutFunctionConcurrency20171031":        "s PutFunctionConcurrency",
		"SetDesiredCapacity":                    "s SetDesiredCapacity",
		"PutBucketVersioning":                   "s PutBucketVersioning",
	} {
		if got := ctKey("s", in); got != want {
			t.Errorf("ctKey(%q) = %q, want %q", in, got, want)
		}
	}
}
