package app

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/reconcile/events"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/guard"
)

// pipelineIntake is what the pipeline receivers share with the drift event receivers.
type pipelineIntake struct {
	store        webhooks.Intake
	notify       func()
	log          *slog.Logger
	metrics      *webhooks.Metrics
	eventMetrics *webhooks.EventMetrics
	failures     *guard.Failures
	fresh        webhooks.Freshness
	now          func() time.Time
}

// newPipelines builds the receivers of the managed clusters' log pipelines: Amazon Data Firehose
// (/events/firehose/<cluster or account>) and Pub/Sub push (/events/pubsub/<cluster>). Each
// unwraps its envelope into the bodies the audit and CloudTrail receivers take, identifies and
// checks them as those receivers do (events.Identify, the freshness window), and stores them
// under the same sources, so that the drift loop judges them exactly as it judges what the audit
// and CloudTrail doors receive.
func newPipelines(cfg config.Config, in pipelineIntake) (*webhooks.FirehoseReceiver, *webhooks.PubSubReceiver, error) {
	var streams []webhooks.FirehoseSource
	for _, name := range slices.Sorted(maps.Keys(cfg.Firehose)) {
		var keys []webhooks.Secret
		for i, k := range cfg.Firehose[name].AccessKeys {
			s, err := webhooks.NewSecret(k.Reveal())
			if err != nil {
				return nil, nil, fmt.Errorf("firehose %q: access key %d: %w", name, i+1, err)
			}
			keys = append(keys, s)
		}
		_, cluster := cfg.Clusters[name]
		streams = append(streams, webhooks.FirehoseSource{Name: name, Keys: keys, Cluster: cluster})
	}
	intakeConfig := webhooks.IntakeConfig{Store: in.store, Notify: in.notify, Logger: in.log, Metrics: in.metrics, EventMetrics: in.eventMetrics, Failures: in.failures}
	fh, err := webhooks.NewFirehoseReceiver(webhooks.FirehoseReceiverConfig{Sources: streams,
		Unwrap: func(name string, body []byte) (string, []webhooks.Part, map[string]int, error) {
			_, cluster := cfg.Clusters[name]
			return firehoseParts(name, cluster, body, in.fresh, in.now())
		},
		IntakeConfig: intakeConfig})
	if err != nil {
		return nil, nil, err
	}
	var subs []webhooks.PubSubSubscription
	keySets := map[string]*webhooks.KeySet{} // one cache per URL or file, shared by the clusters
	for _, name := range slices.Sorted(maps.Keys(cfg.PubSub)) {
		p := cfg.PubSub[name]
		where := p.KeysURL
		if p.KeysFile != "" {
			where = "file:" + p.KeysFile
		}
		ks := keySets[where]
		if ks == nil {
			if p.KeysFile != "" {
				if ks, err = webhooks.NewKeySetFile(p.KeysFile); err != nil {
					return nil, nil, fmt.Errorf("pubsub %q: keys_file: %w", name, err)
				}
			} else {
				ks = webhooks.NewKeySetURL(p.KeysURL, nil)
			}
			keySets[where] = ks
		}
		subs = append(subs, webhooks.PubSubSubscription{Cluster: name, Audience: p.Audience, ServiceAccount: p.ServiceAccount, Keys: ks})
	}
	// A push's token expires within the hour, so a captured push cannot be replayed later: the
	// window into the past that guards the static credentials of the other doors would here only
	// refuse what Pub/Sub redelivers after Parley was down for longer than it (the subscription
	// keeps messages up to seven days). Events dated ahead of the clock are still refused.
	future := webhooks.Freshness{Future: in.fresh.Future}
	ps, err := webhooks.NewPubSubReceiver(webhooks.PubSubReceiverConfig{Subscriptions: subs,
		Unwrap: func(_ string, body []byte) (string, []webhooks.Part, map[string]int, error) {
			return pubsubParts(body, future, in.now())
		},
		IntakeConfig: intakeConfig})
	if err != nil {
		return nil, nil, err
	}
	return fh, ps, nil
}

// firehoseParts decodes a Firehose request posted for name (a cluster when cluster, else an AWS
// account) into its parts.
func firehoseParts(name string, cluster bool, body []byte, fresh webhooks.Freshness, now time.Time) (string, []webhooks.Part, map[string]int, error) {
	req, recs, err := events.DecodeFirehose(body, events.MaxUnwrapped)
	if errors.Is(err, events.ErrUnwrapBudget) {
		return "", nil, nil, fmt.Errorf("%w: %v", webhooks.ErrTooLarge, err)
	}
	if err != nil {
		return "", nil, nil, err
	}
	if !cluster && len(recs.Audit) > 0 {
		return "", nil, nil, fmt.Errorf("%d audit events posted for AWS account %s: audit events are judged in a cluster's repository; post the EKS log group's stream to /events/firehose/<cluster>", len(recs.Audit), name)
	}
	parts, ignored, err := identifyParts(recs, fresh, now)
	if err != nil || cluster {
		return req.RequestID, parts, ignored, err
	}
	for _, p := range parts {
		o, err := events.OriginOf(p.Source, p.Body)
		if err != nil {
			return "", nil, nil, err
		}
		for _, a := range o.Accounts {
			if a != name {
				return "", nil, nil, fmt.Errorf("%w: a CloudTrail record of AWS account %s was posted for account %s; each account's stream posts to its own /events/firehose/<account>", webhooks.ErrWrongScope, a, name)
			}
		}
	}
	return req.RequestID, parts, ignored, nil
}

// pubsubParts decodes a push of a GKE audit LogEntry into its part.
func pubsubParts(body []byte, fresh webhooks.Freshness, now time.Time) (string, []webhooks.Part, map[string]int, error) {
	push, err := events.DecodePubSubPush(body)
	if err != nil {
		return "", nil, nil, err
	}
	var recs events.LogRecords
	if err := recs.AddGKEAuditEntry(push.Data); err != nil {
		return "", nil, nil, fmt.Errorf("pubsub message %s: %w", push.MessageID, err)
	}
	parts, ignored, err := identifyParts(recs, fresh, now)
	return push.MessageID, parts, ignored, err
}

// identifyParts turns log records into the bodies the audit and CloudTrail receivers take, each
// at most webhooks.MaxBodyBytes as theirs are, identified as those receivers identify theirs.
func identifyParts(recs events.LogRecords, fresh webhooks.Freshness, now time.Time) ([]webhooks.Part, map[string]int, error) {
	ignored := maps.Clone(recs.Ignored)
	var parts []webhooks.Part
	for _, b := range recs.Bodies(webhooks.MaxBodyBytes) {
		id, err := events.Identify(b.Source, b.Body)
		if err != nil {
			return nil, nil, err
		}
		if len(id.IDs) > 0 {
			if err := fresh.Check(id.Oldest, id.Newest, now); err != nil {
				return nil, nil, err
			}
		}
		for reason, n := range id.Ignored {
			if ignored == nil {
				ignored = map[string]int{}
			}
			ignored[reason] += n
		}
		parts = append(parts, webhooks.Part{Source: b.Source, Body: b.Body, IDs: id.IDs})
	}
	return parts, ignored, nil
}
