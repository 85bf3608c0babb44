package events

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Origin is what an event body says about where the objects it names are kept, so that a server
// serving many repositories can judge it in the right one: the Git repositories an Argo CD
// Application reads, the AWS accounts CloudTrail records were made in. Flux and audit events say
// neither; they are routed by the cluster they were posted for.
type Origin struct {
	// RepoURLs are an Argo CD Application's source repoURLs as written: sources that apply
	// manifests (path, or a chart from a Git repository) first, then those that only provide
	// values (ref), without repeats. Chart repositories (a source with chart) are left out.
	RepoURLs []string
	// Accounts are the distinct AWS account IDs (recipientAccountId, else the EventBridge
	// envelope's account) of CloudTrail records, sorted.
	Accounts []string
}

// argoOrigin is the part of Parley's Argo CD notification naming the Application's sources
// (.app.spec.source and .app.spec.sources, added to the template in format v1; older bodies
// lack them).
type argoOrigin struct {
	App struct {
		Source  *argoOriginSource  `json:"source"`
		Sources []argoOriginSource `json:"sources"`
	} `json:"app"`
}

type argoOriginSource struct {
	RepoURL string `json:"repoURL"`
	Path    string `json:"path"`
	Chart   string `json:"chart"`
	Ref     string `json:"ref"`
}

// OriginOf reads the Origin of a body of source. It fails only on a body the source's decoder
// would refuse too.
func OriginOf(source string, body []byte) (Origin, error) {
	switch source {
	case SourceArgoCD:
		var n argoOrigin
		if err := json.Unmarshal(body, &n); err != nil {
			return Origin{}, fmt.Errorf("argocd: decode notification: %w", jsonError(body, err))
		}
		srcs := n.App.Sources
		if n.App.Source != nil {
			srcs = append([]argoOriginSource{*n.App.Source}, srcs...)
		}
		var o Origin
		for _, valuesOnly := range []bool{false, true} {
			for _, s := range srcs {
				if s.RepoURL == "" || s.Chart != "" || (s.Ref != "" && s.Path == "") != valuesOnly || slices.Contains(o.RepoURLs, s.RepoURL) {
					continue
				}
				o.RepoURLs = append(o.RepoURLs, s.RepoURL)
			}
		}
		return o, nil
	case SourceCloudTrail:
		var top struct {
			Records []struct {
				Recipient string `json:"recipientAccountId"`
			} `json:"Records"`
			Account string `json:"account"` // EventBridge envelope
			Detail  *struct {
				Recipient string `json:"recipientAccountId"`
			} `json:"detail"`
			Recipient string `json:"recipientAccountId"` // one raw record
		}
		if err := json.Unmarshal(body, &top); err != nil {
			return Origin{}, fmt.Errorf("cloudtrail: decode: %w", jsonError(body, err))
		}
		var o Origin
		add := func(ids ...string) {
			for _, id := range ids {
				if id != "" && !slices.Contains(o.Accounts, id) {
					o.Accounts = append(o.Accounts, id)
				}
			}
		}
		for _, r := range top.Records {
			add(r.Recipient)
		}
		if top.Detail != nil {
			if top.Detail.Recipient != "" {
				add(top.Detail.Recipient)
			} else {
				add(top.Account)
			}
		}
		add(top.Recipient)
		slices.Sort(o.Accounts)
		return o, nil
	case SourceFlux, SourceK8sAudit, SourceAdmission:
		return Origin{}, nil
	}
	return Origin{}, fmt.Errorf("event origin: unknown source %q", source)
}
