package events

import (
	"strconv"
	"strings"

	"github.com/parleyhq/parley/core"
)

// ctChange is one attribute an API call sets (or removes), as a pointer into the resource.
type ctChange struct {
	path    string
	val     any
	removed bool
}

// ctTarget is one Terraform resource an API call changed: found by resourceType and attr == key.
type ctTarget struct {
	resourceType, attr string
	key                any
	changes            []ctChange
	restated           bool   // the call states the whole configuration (PutMetricAlarm)
	tag                *ctTag // an autoscaling group tag, resolved against the tag blocks
}

type ctTag struct {
	key, value string
	propagate  any // nil when not given
	remove     bool
}

// param maps a request parameter to a Terraform attribute.
type param struct{ api, tf string }

// changesOf returns the changes for the parameters present in p, in table order.
func changesOf(p map[string]any, table []param) []ctChange {
	var out []ctChange
	for _, t := range table {
		v, ok := p[t.api]
		if !ok {
			continue
		}
		out = append(out, ctChange{path: "/" + t.tf, val: v})
	}
	return out
}

func target(rtype, attr string, key any, changes []ctChange) []ctTarget {
	if key == nil || len(changes) == 0 {
		return nil
	}
	return []ctTarget{{resourceType: rtype, attr: attr, key: key, changes: changes}}
}

// lastSegment keeps the name from an ARN or a path ("arn:...:function:fn" -> "fn",
// "arn:...:service/cluster/svc" -> "svc").
func lastSegment(v any) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	if i := strings.LastIndexAny(s, ":/"); i >= 0 && strings.HasPrefix(s, "arn:") {
		return s[i+1:]
	}
	return s
}

// ctMappings maps "eventSource EventName" to the Terraform attributes the call changes. Parameter
// names are CloudTrail's (the API's, lower camel case); attributes are the AWS provider's.
var ctMappings = map[string]func(map[string]any) []ctTarget{
	"autoscaling.amazonaws.com SetDesiredCapacity": func(p map[string]any) []ctTarget {
		return target("aws_autoscaling_group", "name", p["autoScalingGroupName"],
			changesOf(p, []param{{"desiredCapacity", "desired_capacity"}}))
	},
	"autoscaling.amazonaws.com UpdateAutoScalingGroup": func(p map[string]any) []ctTarget {
		ch := changesOf(p, []param{{"minSize", "min_size"}, {"maxSize", "max_size"}, {"desiredCapacity", "desired_capacity"},
			{"defaultCooldown", "default_cooldown"}, {"healthCheckType", "health_check_type"},
			{"healthCheckGracePeriod", "health_check_grace_period"}, {"maxInstanceLifetime", "max_instance_lifetime"},
			{"capacityRebalance", "capacity_rebalance"}, {"defaultInstanceWarmup", "default_instance_warmup"},
			{"newInstancesProtectedFromScaleIn", "protect_from_scale_in"}, {"terminationPolicies", "termination_policies"},
			{"placementGroup", "placement_group"}, {"serviceLinkedRoleARN", "service_linked_role_arn"}})
		// The API takes subnets as one comma-separated string; Terraform as a list.
		if s, ok := p["vPCZoneIdentifier"].(string); ok {
			var list []any
			for _, id := range strings.Split(s, ",") {
				list = append(list, strings.TrimSpace(id))
			}
			ch = append(ch, ctChange{path: "/vpc_zone_identifier", val: list})
		}
		return target("aws_autoscaling_group", "name", p["autoScalingGroupName"], ch)
	},
	"autoscaling.amazonaws.com CreateOrUpdateTags": func(p map[string]any) []ctTarget { return asgTags(p, false) },
	"autoscaling.amazonaws.com DeleteTags":         func(p map[string]any) []ctTarget { return asgTags(p, true) },
	"monitoring.amazonaws.com PutMetricAlarm": func(p map[string]any) []ctTarget {
		ch := changesOf(p, []param{{"threshold", "threshold"}, {"evaluationPeriods", "evaluation_periods"},
			{"datapointsToAlarm", "datapoints_to_alarm"}, {"period", "period"}, {"comparisonOperator", "comparison_operator"},
			{"statistic", "statistic"}, {"extendedStatistic", "extended_statistic"}, {"metricName", "metric_name"},
			{"namespace", "namespace"}, {"unit", "unit"}, {"treatMissingData", "treat_missing_data"},
			{"alarmDescription", "alarm_description"}, {"actionsEnabled", "actions_enabled"},
			{"alarmActions", "alarm_actions"}, {"oKActions", "ok_actions"}, {"insufficientDataActions", "insufficient_data_actions"}})
		// Dimensions are a list of {name, value} in the API and a map in Terraform.
		if dims, ok := p["dimensions"].([]any); ok {
			for _, d := range dims {
				if n := stringAt(d, "name"); n != "" {
					ch = append(ch, ctChange{path: "/dimensions/" + core.EscapePointerToken(n), val: stringAt(d, "value")})
				}
			}
		}
		t := target("aws_cloudwatch_metric_alarm", "alarm_name", p["alarmName"], ch)
		for i := range t {
			t[i].restated = true // PutMetricAlarm replaces the whole alarm definition
		}
		return t
	},
	"ec2.amazonaws.com ModifyInstanceAttribute": func(p map[string]any) []ctTarget {
		// Each attribute comes wrapped: {"instanceType": {"value": "m5.large"}}.
		var ch []ctChange
		for _, t := range []param{{"instanceType", "instance_type"}, {"disableApiTermination", "disable_api_termination"},
			{"ebsOptimized", "ebs_optimized"}, {"sourceDestCheck", "source_dest_check"}} {
			if w, ok := p[t.api].(map[string]any); ok {
				if v, ok := w["value"]; ok {
					ch = append(ch, ctChange{path: "/" + t.tf, val: v})
				}
			}
		}
		// EC2 instance IDs are assigned by AWS: only an index that knows state can find them.
		return target("aws_instance", "id", p["instanceId"], ch)
	},
	"rds.amazonaws.com ModifyDBInstance": func(p map[string]any) []ctTarget {
		return target("aws_db_instance", "identifier", p["dBInstanceIdentifier"], changesOf(p, []param{
			{"allocatedStorage", "allocated_storage"}, {"maxAllocatedStorage", "max_allocated_storage"},
			{"dBInstanceClass", "instance_class"}, {"multiAZ", "multi_az"}, {"backupRetentionPeriod", "backup_retention_period"},
			{"engineVersion", "engine_version"}, {"iops", "iops"}, {"storageType", "storage_type"},
			{"deletionProtection", "deletion_protection"}, {"publiclyAccessible", "publicly_accessible"}}))
	},
	"lambda.amazonaws.com UpdateFunctionConfiguration": func(p map[string]any) []ctTarget {
		ch := changesOf(p, []param{{"memorySize", "memory_size"}, {"timeout", "timeout"}, {"handler", "handler"},
			{"runtime", "runtime"}, {"role", "role"}, {"description", "description"}})
		if vars, ok := lookup(p, "/environment/variables"); ok {
			if m, ok := vars.(map[string]any); ok {
				for _, k := range sortedKeys(m) {
					ch = append(ch, ctChange{path: "/environment/0/variables/" + core.EscapePointerToken(k), val: m[k]})
				}
			}
		}
		return target("aws_lambda_function", "function_name", lastSegment(p["functionName"]), ch)
	},
	"lambda.amazonaws.com PutFunctionConcurrency": func(p map[string]any) []ctTarget {
		return target("aws_lambda_function", "function_name", lastSegment(p["functionName"]),
			changesOf(p, []param{{"reservedConcurrentExecutions", "reserved_concurrent_executions"}}))
	},
	"ecs.amazonaws.com UpdateService": func(p map[string]any) []ctTarget {
		// Looked up by service name alone: the cluster is usually a reference in Terraform.
		return target("aws_ecs_service", "name", lastSegment(p["service"]), changesOf(p, []param{
			{"desiredCount", "desired_count"}, {"platformVersion", "platform_version"},
			{"healthCheckGracePeriodSeconds", "health_check_grace_period_seconds"}, {"enableExecuteCommand", "enable_execute_command"}}))
	},
	"dynamodb.amazonaws.com UpdateTable": func(p map[string]any) []ctTarget {
		ch := changesOf(p, []param{{"billingMode", "billing_mode"}})
		if pt, ok := p["provisionedThroughput"].(map[string]any); ok {
			ch = append(ch, changesOf(pt, []param{{"readCapacityUnits", "read_capacity"}, {"writeCapacityUnits", "write_capacity"}})...)
		}
		return target("aws_dynamodb_table", "name", p["tableName"], ch)
	},
	"s3.amazonaws.com PutBucketVersioning": func(p map[string]any) []ctTarget {
		var ch []ctChange
		if s, ok := lookup(p, "/VersioningConfiguration/Status"); ok {
			ch = append(ch, ctChange{path: "/versioning_configuration/0/status", val: s})
		}
		if s, ok := lookup(p, "/VersioningConfiguration/MfaDelete"); ok {
			ch = append(ch, ctChange{path: "/versioning_configuration/0/mfa_delete", val: s})
		}
		return target("aws_s3_bucket_versioning", "bucket", p["bucketName"], ch)
	},
	"iam.amazonaws.com PutRolePolicy": func(p map[string]any) []ctTarget {
		// An inline role policy: part of the IAM skeleton, which policies usually declare immutable.
		return target("aws_iam_role_policy", "name", p["policyName"], changesOf(p, []param{{"policyDocument", "policy"}}))
	},
}

// asgTags maps autoscaling tags ([{resourceId, resourceType, key, value, propagateAtLaunch}]) to
// the group's tag blocks. Declaration tags (parley.dev/*) are read as declarations, not observed.
func asgTags(p map[string]any, remove bool) []ctTarget {
	list, _ := p["tags"].([]any)
	var out []ctTarget
	for _, t := range list {
		k := stringAt(t, "key")
		if k == "" || isParleyKey(k) || stringAt(t, "resourceId") == "" {
			continue
		}
		if rt := stringAt(t, "resourceType"); rt != "" && rt != "auto-scaling-group" {
			continue
		}
		tag := &ctTag{key: k, value: stringAt(t, "value"), remove: remove}
		if m, ok := t.(map[string]any); ok {
			tag.propagate = m["propagateAtLaunch"]
		}
		out = append(out, ctTarget{resourceType: "aws_autoscaling_group", attr: "name", key: stringAt(t, "resourceId"), tag: tag})
	}
	return out
}

// tagChanges finds the tag block holding the key (tag blocks are /tag/<i>/key, value,
// propagate_at_launch in fielddiff's addressing). A new key is a new block after the last one. It
// returns nil when the index has no values to search, or a removed key has no block.
func tagChanges(tf TerraformIndex, res core.Field, tag *ctTag) []ctChange {
	tv, ok := tf.(TerraformValues)
	if !ok {
		return nil
	}
	want := core.StringValue(tag.key)
	idx, n := -1, 0
	for ; ; n++ {
		v, ok := tv.Value(withPath(res, "/tag/"+strconv.Itoa(n)+"/key"))
		if !ok {
			break
		}
		if idx < 0 && v.Equal(want) {
			idx = n
		}
	}
	if tag.remove {
		if idx < 0 {
			return nil
		}
		return []ctChange{{path: "/tag/" + strconv.Itoa(idx), removed: true}}
	}
	if idx < 0 {
		idx = n
	}
	base := "/tag/" + strconv.Itoa(idx)
	ch := []ctChange{{path: base + "/key", val: tag.key}, {path: base + "/value", val: tag.value}}
	if tag.propagate != nil {
		ch = append(ch, ctChange{path: base + "/propagate_at_launch", val: tag.propagate})
	}
	return ch
}
