package gitops

import (
	"net/url"
	"strings"
)

// A GitOps source names the repository it reads by URL: an Argo CD source's repoURL, a Flux
// GitRepository's spec.url. When Discover knows the URL of the repository it reads (its origin
// remote), a source naming another repository is not read from this one: its paths mean files of
// that repository, and events about its objects are judged there.

// RepoKey is a Git URL reduced to what names a repository: the host and the path, lower-cased,
// without credentials, port, scheme or ".git", so that https://github.com/acme/infra.git,
// git@github.com:acme/infra and ssh://git@github.com:22/acme/infra are one repository. It is ""
// for a string that names no host (a local path, a file:// URL, an empty string).
func RepoKey(raw string) string {
	raw = strings.TrimSpace(raw)
	var host, p string
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" && u.Host != "" {
		switch strings.ToLower(u.Scheme) {
		case "https", "http", "ssh", "git", "git+ssh", "ssh+git":
		default:
			return ""
		}
		host, p = u.Hostname(), u.Path
	} else if user, rest, ok := strings.Cut(raw, "@"); ok && !strings.Contains(user, "/") && !strings.Contains(raw, "://") {
		// scp-like syntax: user@host:path. A host holds no slash: "@/:0" names no repository.
		if host, p, ok = strings.Cut(rest, ":"); !ok || strings.ContainsAny(host, "/\\") {
			return ""
		}
	} else {
		return ""
	}
	p = strings.Trim(strings.TrimSuffix(strings.Trim(p, "/"), ".git"), "/")
	if host == "" || p == "" {
		return ""
	}
	return strings.ToLower(host + "/" + p)
}

// foreign reports whether a source URL names a repository other than the one Discover reads. It
// is false when either is unknown: then the source is taken to be this repository, as before
// Discover knew its own URL.
func (d *discovery) foreign(sourceURL string) bool {
	k := RepoKey(sourceURL)
	return d.self != "" && k != "" && k != d.self
}

// gitRepositories maps "namespace/name" of every Flux GitRepository in the repository to its URL.
func (d *discovery) gitRepositories() map[string]string {
	out := map[string]string{}
	for _, name := range d.names {
		for _, doc := range d.docs[name] {
			if doc.key.kind != "GitRepository" || doc.key.group != "source.toolkit.fluxcd.io" {
				continue
			}
			if spec := field(doc.node, "spec"); spec != nil {
				if u := field(spec, "url"); u != nil {
					out[doc.key.namespace+"/"+doc.key.name] = u.Value
				}
			}
		}
	}
	return out
}

// dropForeignFlux stops following Flux Kustomizations and HelmReleases whose GitRepository (found
// in this repository) reads another repository: their paths are that repository's.
func (d *discovery) dropForeignFlux() {
	if d.self == "" {
		return
	}
	repos := d.gitRepositories()
	for i := range d.managers {
		m := &d.managers[i]
		if m.gitSource == "" {
			continue
		}
		u, ok := repos[m.gitSource]
		if !ok || !d.foreign(u) {
			continue
		}
		d.problem("%s: %s %s/%s reads GitRepository %s (%s), another repository: its objects are not read from this one",
			m.File, m.Target.Kind, m.Target.Namespace, m.Target.Name, m.gitSource, u)
		m.roots, m.helm = nil, nil
	}
}
