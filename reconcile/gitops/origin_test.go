package gitops

import (
	"strings"
	"testing"

	"github.com/parleyhq/parley/core"
)

func TestRepoKey(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/acme/fleet.git":                  "github.com/acme/fleet",
		"https://GitHub.com/Acme/Fleet/":                     "github.com/acme/fleet",
		"http://x-access-token:s3cret@github.com/acme/fleet": "github.com/acme/fleet",
		"git@github.com:acme/fleet.git":                      "github.com/acme/fleet",
		"ssh://git@github.com:22/acme/fleet":                 "github.com/acme/fleet",
		"ssh://git@ghe.example.com/org/sub/repo.git":         "ghe.example.com/org/sub/repo",
		"/srv/git/fleet.git":                                 "",
		"file:///srv/git/fleet.git":                          "",
		"oci://ghcr.io/acme/manifests":                       "",
		"":                                                   "",
		"github.com:acme/fleet":                              "",
	} {
		if got := RepoKey(in); got != want {
			t.Errorf("RepoKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// A source that reads another repository is not read from this one, however the two URLs are
// spelled; with no known origin every source is this repository, as before.
func TestDiscoverFromSkipsSourcesOfOtherRepositories(t *testing.T) {
	files := map[string][]byte{
		"apps/web/deploy.yaml":   []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: prod\n"),
		"apps/cache/deploy.yaml": []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: cache\n  namespace: prod\n"),
		"apps/jobs/deploy.yaml":  []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: jobs\n  namespace: prod\n"),
		"argocd/web.yaml": []byte("apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: web\n  namespace: argocd\n" +
			"spec:\n  source:\n    repoURL: https://github.com/acme/fleet\n    path: apps/web\n  destination:\n    namespace: prod\n"),
		"argocd/cache.yaml": []byte("apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: cache\n  namespace: argocd\n" +
			"spec:\n  source:\n    repoURL: git@github.com:acme/team-cache.git\n    path: apps/cache\n  destination:\n    namespace: prod\n"),
		"flux/sources.yaml": []byte("apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: jobs\n  namespace: flux-system\n" +
			"spec:\n  url: https://github.com/acme/team-jobs\n---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\n" +
			"spec:\n  url: ssh://git@github.com/acme/fleet.git\n"),
		"flux/jobs.yaml": []byte("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: jobs\n  namespace: flux-system\n" +
			"spec:\n  path: ./apps/jobs\n  sourceRef:\n    kind: GitRepository\n    name: jobs\n"),
		"flux/web.yaml": []byte("apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: web\n  namespace: flux-system\n" +
			"spec:\n  path: ./apps/web\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n"),
	}
	managers := func(inv *Inventory, name string) []string {
		pl, ok := inv.Locate(core.K8sField("apps", "Deployment", "prod", name, ""))
		if !ok {
			t.Fatalf("%s not found", name)
		}
		var out []string
		for _, m := range pl.Managers {
			out = append(out, m.Target.String())
		}
		return out
	}
	inv, problems := DiscoverFrom(files, "https://x-access-token:tok@github.com/acme/fleet.git")
	if got := managers(inv, "web"); strings.Join(got, ",") != "Application argocd/web,Kustomization flux-system/web" {
		t.Errorf("web is applied by %v", got)
	}
	for _, name := range []string{"cache", "jobs"} {
		if got := managers(inv, name); len(got) != 0 {
			t.Errorf("%s is read from another repository, yet applied here by %v", name, got)
		}
	}
	var text []string
	for _, p := range problems {
		text = append(text, p.Error())
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{"argocd/cache.yaml: Application argocd/cache: source apps/cache reads git@github.com:acme/team-cache.git, another repository",
		"flux/jobs.yaml: Kustomization flux-system/jobs reads GitRepository flux-system/jobs (https://github.com/acme/team-jobs), another repository"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
	// Unknown origin (a local clone): every source is this repository.
	for _, origin := range []string{"", "/srv/git/fleet.git"} {
		inv, _ := DiscoverFrom(files, origin)
		if got := managers(inv, "cache"); len(got) != 1 {
			t.Errorf("origin %q: cache applied by %v", origin, got)
		}
	}
}

// FuzzRepoKey: any string gives a key or "", never a panic; a key is lower-case and names a host
// and a path without ".git" or slashes at its ends.
func FuzzRepoKey(f *testing.F) {
	for _, s := range []string{"https://github.com/acme/fleet.git", "git@github.com:acme/fleet", "ssh://git@h:22/a/b", "/local", "a@b:c/", "https://h/a/.git", "http://[::1]:80/x.git"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k := RepoKey(s)
		if k == "" {
			return
		}
		host, p, ok := strings.Cut(k, "/")
		if !ok || host == "" || p == "" || k != strings.ToLower(k) || strings.HasSuffix(k, "/") {
			t.Fatalf("RepoKey(%q) = %q", s, k)
		}
	})
}
