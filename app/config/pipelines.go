package config

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// The managed clusters' audit logs arrive through their providers' pipelines (docs/admission.md,
// "Which sources for which cluster"): EKS through CloudWatch Logs and Amazon Data Firehose
// (POST /events/firehose/<name>), GKE through a Cloud Logging sink and a Pub/Sub push
// subscription (POST /events/pubsub/<cluster>).

// Firehose is one Firehose delivery stream's endpoint (a firehose "NAME" block; NAME is a
// cluster, whose cluster block names its repository, or an AWS account of an aws_account block).
type Firehose struct {
	// AccessKeys are the stream's access keys, one per non-empty line of AccessKeyFile: two
	// while the stream's key is rotated.
	AccessKeys    []Secret
	AccessKeyFile string
}

// PubSub is one cluster's push subscription (a pubsub "CLUSTER" block).
type PubSub struct {
	// Audience is the push subscription's OIDC audience.
	Audience string
	// ServiceAccount is the email of the service account the subscription pushes as.
	ServiceAccount string
	// KeysURL is where the keys that sign the push tokens are fetched (Google's, by default);
	// KeysFile, instead, a JSON Web Key Set read at start.
	KeysURL  string
	KeysFile string
}

// DefaultGoogleKeysURL is Google's published OIDC signing keys (webhooks.GoogleKeysURL).
const DefaultGoogleKeysURL = "https://www.googleapis.com/oauth2/v3/certs"

type firehoseBlock struct {
	Name          string    `hcl:"name,label"`
	AccessKeyFile string    `hcl:"access_key_file"`
	DefRange      hcl.Range `hcl:",def_range"`
}

type pubsubBlock struct {
	Name           string    `hcl:"name,label"`
	Audience       string    `hcl:"audience"`
	ServiceAccount string    `hcl:"service_account"`
	KeysURL        *string   `hcl:"keys_url,optional"`
	KeysFile       *string   `hcl:"keys_file,optional"`
	DefRange       hcl.Range `hcl:",def_range"`
}

// firehoseMap reads the firehose blocks and their access key files.
func firehoseMap(blocks []firehoseBlock) (map[string]Firehose, []error) {
	if len(blocks) == 0 {
		return nil, nil
	}
	m := map[string]Firehose{}
	var errs []error
	for _, b := range blocks {
		where := fmt.Sprintf("%s:%d: firehose %q", b.DefRange.Filename, b.DefRange.Start.Line, b.Name)
		if _, dup := m[b.Name]; dup {
			errs = append(errs, fmt.Errorf("%s is defined twice", where))
			continue
		}
		f := Firehose{AccessKeyFile: b.AccessKeyFile}
		raw, err := os.ReadFile(b.AccessKeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: access_key_file: %w", where, err))
			continue
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if line = strings.TrimSpace(line); line == "" {
				continue
			}
			if len(line) < 16 {
				errs = append(errs, fmt.Errorf("%s: access_key_file %s: want keys of 16 characters or more, one a line", where, b.AccessKeyFile))
				break
			}
			f.AccessKeys = append(f.AccessKeys, NewSecret(line))
		}
		if len(f.AccessKeys) == 0 {
			errs = append(errs, fmt.Errorf("%s: access_key_file %s holds no key", where, b.AccessKeyFile))
		}
		m[b.Name] = f
	}
	return m, errs
}

// pubsubMap reads the pubsub blocks.
func pubsubMap(blocks []pubsubBlock) (map[string]PubSub, []error) {
	if len(blocks) == 0 {
		return nil, nil
	}
	m := map[string]PubSub{}
	var errs []error
	for _, b := range blocks {
		where := fmt.Sprintf("%s:%d: pubsub %q", b.DefRange.Filename, b.DefRange.Start.Line, b.Name)
		if _, dup := m[b.Name]; dup {
			errs = append(errs, fmt.Errorf("%s is defined twice", where))
			continue
		}
		p := PubSub{Audience: b.Audience, ServiceAccount: b.ServiceAccount, KeysURL: DefaultGoogleKeysURL}
		setP(&p.KeysFile, b.KeysFile)
		switch {
		case b.KeysURL != nil && p.KeysFile != "":
			errs = append(errs, fmt.Errorf("%s: keys_url and keys_file: choose one", where))
		case p.KeysFile != "":
			p.KeysURL = ""
		case b.KeysURL != nil:
			p.KeysURL = *b.KeysURL
			if u, err := url.Parse(p.KeysURL); err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
				errs = append(errs, fmt.Errorf("%s: keys_url %q is not an http(s) URL", where, p.KeysURL))
			}
		}
		if p.Audience == "" || !strings.Contains(p.ServiceAccount, "@") {
			errs = append(errs, fmt.Errorf("%s: want the push subscription's audience and its service account's email", where))
		}
		m[b.Name] = p
	}
	return m, errs
}

// validatePipelines checks that each firehose block names a cluster or an AWS account, and each
// pubsub block a cluster, that the configuration routes to a repository.
func (c *Config) validatePipelines() []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(c.Firehose)) {
		_, cluster := c.Clusters[name]
		_, account := c.AWSAccounts[name]
		switch {
		case cluster && account:
			errs = append(errs, fmt.Errorf("firehose %q: both a cluster and an aws_account are named so; rename the cluster", name))
		case !cluster && !account:
			errs = append(errs, fmt.Errorf("firehose %q: no cluster or aws_account block of that name names its repository", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.PubSub)) {
		if _, ok := c.Clusters[name]; !ok {
			errs = append(errs, fmt.Errorf("pubsub %q: no cluster %q block names its repository", name, name))
		}
	}
	return errs
}
