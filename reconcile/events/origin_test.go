package events

import (
	"slices"
	"testing"
)

func TestOriginOf(t *testing.T) {
	for _, c := range []struct {
		name, source, body string
		urls, accounts     []string
	}{
		{"argo single source", SourceArgoCD, `{"app":{"name":"web","source":{"repoURL":"https://github.com/acme/a.git","path":"apps"}}}`,
			[]string{"https://github.com/acme/a.git"}, nil},
		{"argo multi-source: manifests before values, charts left out", SourceArgoCD,
			`{"app":{"name":"web","source":null,"sources":[{"repoURL":"https://github.com/acme/values","ref":"values"},
			{"repoURL":"https://charts.example.com","chart":"web"},{"repoURL":"git@github.com:acme/app.git","path":"deploy"},
			{"repoURL":"git@github.com:acme/app.git","path":"extra"}]}}`,
			[]string{"git@github.com:acme/app.git", "https://github.com/acme/values"}, nil},
		{"argo body of an older template", SourceArgoCD, `{"parley":"v1","app":{"name":"web"}}`, nil, nil},
		{"cloudtrail records file", SourceCloudTrail, `{"Records":[{"recipientAccountId":"222222222222"},{"recipientAccountId":"111111111111"},{"recipientAccountId":"222222222222"}]}`,
			nil, []string{"111111111111", "222222222222"}},
		{"cloudtrail eventbridge", SourceCloudTrail, `{"detail-type":"AWS API Call via CloudTrail","account":"333333333333","detail":{"eventName":"X"}}`,
			nil, []string{"333333333333"}},
		{"cloudtrail eventbridge with recipient", SourceCloudTrail, `{"account":"333333333333","detail":{"recipientAccountId":"444444444444"}}`,
			nil, []string{"444444444444"}},
		{"cloudtrail one record", SourceCloudTrail, `{"eventName":"X","recipientAccountId":"555555555555"}`, nil, []string{"555555555555"}},
		{"flux says nothing", SourceFlux, `{}`, nil, nil},
	} {
		o, err := OriginOf(c.source, []byte(c.body))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !slices.Equal(o.RepoURLs, c.urls) || !slices.Equal(o.Accounts, c.accounts) {
			t.Errorf("%s: got %+v", c.name, o)
		}
	}
	if _, err := OriginOf(SourceArgoCD, []byte(`{"app":[]}`)); err == nil {
		t.Error("a body the decoder refuses must fail")
	}
	if _, err := OriginOf("smtp", []byte(`{}`)); err == nil {
		t.Error("an unknown source must fail")
	}
}
