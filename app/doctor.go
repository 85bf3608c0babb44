package app

// `parley doctor`: whether an install works, checked against GitHub the way serve will use it.
// Each check is one line (ok, warn or FAIL) that says what to do next when it is not ok.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/google/go-github/v60/github"

	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/app/internal/ghauth"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/webhooks"
)

// Check statuses.
const (
	CheckOK   = "ok"
	CheckWarn = "warn"
	CheckFail = "FAIL"
)

// Check is one finding of Doctor.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Next   string `json:"next,omitempty"` // what to do when it is not ok
}

// DoctorOptions are what Doctor cannot read from the configuration.
type DoctorOptions struct {
	// MemoryLimit is the container's memory limit in bytes (cgroup memory.max, or a flag); 0 is
	// unknown, -1 unlimited.
	MemoryLimit int64
	// MemorySource says where MemoryLimit came from, for the check's line.
	MemorySource string
	// Transport carries the calls to GitHub; nil is http.DefaultTransport.
	Transport http.RoundTripper
}

// WorkerOwnMiB is a render worker process's own memory beside its render budget (the chart's
// values.yaml and docs/security.md), and ServerOwnMiB serve's own.
const (
	WorkerOwnMiB = 130
	ServerOwnMiB = 256 // the chart's own allowance (charts/parley/templates/_helpers.tpl parley.checkMemory)
)

// Doctor checks cfg against GitHub: the App's key, its webhook, its installations' permissions and
// events against what Parley needs (app.yml), each installed repository's policy and the files its
// patterns name, and the render budgets against the memory limit. It returns every check it could
// run; a check that cannot run because an earlier one failed is not listed.
func Doctor(ctx context.Context, cfg config.Config, opts DoctorOptions) []Check {
	var out []Check
	add := func(c ...Check) { out = append(out, c...) }
	add(BudgetCheck(cfg, opts.MemoryLimit, opts.MemorySource))
	base := opts.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	a, err := ghauth.NewApp(cfg.AppID, []byte(cfg.PrivateKey.Reveal()), ghauth.Options{BaseURL: cfg.GitHubURL})
	if err != nil {
		add(Check{"app", CheckFail, fmt.Sprintf("App %d: %v", cfg.AppID, err), "set the App's PEM private key (private_key_file, PARLEY_PRIVATE_KEY or app_dir)"})
		return out
	}
	ac, err := a.AppClient(base)
	if err != nil {
		add(Check{"app", CheckFail, err.Error(), "check github_url"})
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	me, _, err := ac.Apps.Get(ctx, "")
	if err != nil {
		add(appKeyCheck(cfg, err))
		return out
	}
	add(Check{"app", CheckOK, fmt.Sprintf("GitHub accepts the key of App %s (ID %d) at %s", me.GetSlug(), me.GetID(), cfg.GitHubURL), ""})
	add(hookCheck(ctx, ac, cfg))

	want := ParleyManifest("", "")
	insts, _, err := ac.Apps.ListInstallations(ctx, &github.ListOptions{PerPage: 100})
	if err != nil {
		add(Check{"installations", CheckFail, "list the App's installations: " + err.Error(), "retry; check github_url"})
		return out
	}
	if len(insts) == 0 {
		add(Check{"installations", CheckFail, "the App is installed nowhere", "install it on the repositories Parley should judge: " + me.GetHTMLURL() + "/installations/new"})
		return out
	}
	for _, in := range insts {
		add(grantsCheck(in, want))
		add(repositoryChecks(ctx, a, base, cfg, in)...)
	}
	return out
}

// appKeyCheck reads GET /app's failure: GitHub refusing the JWT (the key is no key of that App)
// is not GitHub being unreachable.
func appKeyCheck(cfg config.Config, err error) Check {
	var ge *github.ErrorResponse
	if errors.As(err, &ge) && ge.Response != nil && (ge.Response.StatusCode == http.StatusUnauthorized || ge.Response.StatusCode == http.StatusForbidden) {
		return Check{"app", CheckFail, fmt.Sprintf("GitHub rejects App %d's key (%d %s)", cfg.AppID, ge.Response.StatusCode, ge.Message),
			"app_id and the private key must be the same App's: generate a key on the App's settings page (Private keys) and configure it"}
	}
	return Check{"app", CheckFail, fmt.Sprintf("GitHub at %s did not answer: %v", cfg.GitHubURL, err), "check github_url and the network path to GitHub (proxy, egress rules)"}
}

// hookCheck compares the App's webhook with serve's: GitHub must sign deliveries (serve has a
// secret; GitHub answers "********" for its own and never shows it, so the two cannot be compared),
// and send them to serve's public address when one is configured.
func hookCheck(ctx context.Context, ac *github.Client, cfg config.Config) Check {
	hc, _, err := ac.Apps.GetHookConfig(ctx)
	if err != nil {
		return Check{"webhook", CheckWarn, "read the App's webhook configuration: " + err.Error(), "check the App's webhook on its settings page"}
	}
	if hc.GetSecret() == "" {
		return Check{"webhook", CheckFail, "the App has no webhook secret: GitHub sends unsigned deliveries, which serve refuses",
			"set the App's webhook secret to one of serve's webhook_secrets"}
	}
	if hc.GetURL() == "" {
		return Check{"webhook", CheckFail, "the App has no webhook URL: GitHub sends serve nothing", "set it to https://YOUR-HOST" + webhooks.GitHubPath}
	}
	if cfg.PublicURL != "" && hc.GetURL() != strings.TrimSuffix(cfg.PublicURL, "/")+webhooks.GitHubPath {
		return Check{"webhook", CheckWarn, fmt.Sprintf("the App sends webhooks to %s, not to public_url's %s%s", hc.GetURL(), strings.TrimSuffix(cfg.PublicURL, "/"), webhooks.GitHubPath),
			"point the App's webhook URL at serve"}
	}
	return Check{"webhook", CheckOK, fmt.Sprintf("GitHub signs deliveries to %s; serve has %d secret(s) (GitHub never shows its own: if deliveries fail their signature, set it again)", hc.GetURL(), len(cfg.WebhookSecrets)), ""}
}

var permissionRank = map[string]int{"read": 1, "write": 2, "admin": 3}

// grantsCheck compares an installation's permissions and events with the manifest's.
func grantsCheck(in *github.Installation, want Manifest) Check {
	name := "installation " + in.GetAccount().GetLogin()
	have := map[string]string{}
	if p := in.GetPermissions(); p != nil {
		// go-github's InstallationPermissions is a struct; its JSON is GitHub's map.
		if b, err := json.Marshal(p); err == nil {
			json.Unmarshal(b, &have)
		}
	}
	var missing []string
	for _, k := range slices.Sorted(maps.Keys(want.DefaultPermissions)) {
		if permissionRank[have[k]] < permissionRank[want.DefaultPermissions[k]] {
			missing = append(missing, fmt.Sprintf("%s: %s (has %q)", k, want.DefaultPermissions[k], have[k]))
		}
	}
	var events []string
	for _, e := range want.DefaultEvents {
		if !slices.Contains(in.Events, e) {
			events = append(events, e)
		}
	}
	if len(missing) > 0 || len(events) > 0 {
		var parts []string
		if len(missing) > 0 {
			parts = append(parts, "permissions missing: "+strings.Join(missing, ", "))
		}
		if len(events) > 0 {
			parts = append(parts, "events not subscribed: "+strings.Join(events, ", "))
		}
		return Check{name, CheckFail, fmt.Sprintf("installation %d: %s", in.GetID(), strings.Join(parts, "; ")),
			"grant them on the App's settings page (Permissions & events, as app.yml lists), then accept the new permissions on the installation: " + in.GetHTMLURL()}
	}
	return Check{name, CheckOK, fmt.Sprintf("installation %d has every permission and event Parley needs", in.GetID()), ""}
}

// repositoryChecks checks each repository of an installation: its policy on the default branch
// parses (policy.Parse, what `parley policy check` runs), and the files its ledger reads exist.
func repositoryChecks(ctx context.Context, a *ghauth.App, base http.RoundTripper, cfg config.Config, in *github.Installation) []Check {
	c, err := a.Client(in.GetID(), base)
	if err == nil {
		var repos *github.ListRepositories
		repos, _, err = c.Apps.ListRepos(ctx, &github.ListOptions{PerPage: 100})
		if err == nil {
			var out []Check
			for _, r := range repos.Repositories {
				out = append(out, policyCheck(ctx, c, cfg, r))
			}
			if len(out) == 0 {
				out = append(out, Check{"installation " + in.GetAccount().GetLogin(), CheckWarn, "the installation has no repositories", "add the GitOps repositories to it: " + in.GetHTMLURL()})
			}
			return out
		}
	}
	return []Check{{"installation " + in.GetAccount().GetLogin(), CheckFail, fmt.Sprintf("installation %d: list its repositories: %v", in.GetID(), err), "check the installation is not suspended: " + in.GetHTMLURL()}}
}

func policyCheck(ctx context.Context, c *github.Client, cfg config.Config, r *github.Repository) Check {
	full, branch := r.GetFullName(), r.GetDefaultBranch()
	name := "policy " + full
	owner, repo, _ := strings.Cut(full, "/")
	fc, _, resp, err := c.Repositories.GetContents(ctx, owner, repo, cfg.PolicyPath, &github.RepositoryContentGetOptions{Ref: branch})
	if resp != nil && resp.StatusCode == http.StatusNotFound {
		return Check{name, CheckWarn, fmt.Sprintf("no %s on %s: Parley judges its pull requests under the default policy", cfg.PolicyPath, branch),
			"run parley init in a clone, commit .parley/policy.hcl and merge it"}
	}
	if err != nil {
		return Check{name, CheckFail, fmt.Sprintf("read %s@%s: %v", cfg.PolicyPath, branch, err), "check the installation can read contents"}
	}
	src, err := fc.GetContent()
	if err != nil {
		return Check{name, CheckFail, fmt.Sprintf("read %s@%s: %v", cfg.PolicyPath, branch, err), ""}
	}
	p, err := policy.Parse([]byte(src), full+":"+cfg.PolicyPath)
	if err != nil {
		return Check{name, CheckFail, fmt.Sprintf("%s@%s does not parse: %v", cfg.PolicyPath, branch, err),
			"fix it (parley policy check " + cfg.PolicyPath + " in a clone prints each error) and merge the fix"}
	}
	detail := fmt.Sprintf("%s@%s: %d intents, %d actors, %d fields, %d rules", cfg.PolicyPath, branch, len(p.Intents), len(p.Actors), len(p.Fields), len(p.Rules))
	// The ledger's include patterns must name files that exist, or its history reads nothing.
	tree, _, err := c.Git.GetTree(ctx, owner, repo, branch, true)
	if err != nil {
		return Check{name, CheckWarn, detail + "; its files could not be listed: " + err.Error(), ""}
	}
	var paths []string
	for _, e := range tree.Entries {
		if e.GetType() == "blob" {
			paths = append(paths, e.GetPath())
		}
	}
	var none []string
	read := 0
	for _, pat := range p.Ledger.WithDefaults().Include {
		hit := false
		for _, f := range paths {
			if ok, _ := doublestar.Match(pat, f); ok {
				hit = true
				break
			}
		}
		if !hit {
			none = append(none, pat)
		}
	}
	for _, f := range paths {
		if p.Ledger.Match(f) {
			read++
		}
	}
	if len(none) > 0 {
		return Check{name, CheckWarn, fmt.Sprintf("%s; ledger include pattern(s) %s match no file on %s", detail, strings.Join(none, ", "), branch),
			"correct the ledger block's include patterns (parley policy check lists them)"}
	}
	if notes := p.TrustNotes(); len(notes) > 0 {
		return Check{name, CheckWarn, fmt.Sprintf("%s; the ledger reads %d of %d files; %s", detail, read, len(paths), strings.Join(notes, "; ")), "see docs/policy.md on signatures"}
	}
	return Check{name, CheckOK, fmt.Sprintf("%s; the ledger reads %d of %d files", detail, read, len(paths)), ""}
}

// BudgetCheck compares what the render workers may use at once with the memory limit:
// render_parallel × (render_memory + a worker's own) + serve's own must fit.
func BudgetCheck(cfg config.Config, limit int64, source string) Check {
	needMiB := int64(cfg.RenderParallel)*(cfg.RenderMemory+WorkerOwnMiB) + ServerOwnMiB
	detail := fmt.Sprintf("render_parallel %d × (render_memory %d MiB + %d MiB a worker) + %d MiB serve = %d MiB",
		cfg.RenderParallel, cfg.RenderMemory, WorkerOwnMiB, ServerOwnMiB, needMiB)
	switch {
	case limit < 0:
		return Check{"memory", CheckOK, detail + "; no memory limit (" + source + ")", ""}
	case limit == 0:
		return Check{"memory", CheckWarn, detail + "; the memory limit is unknown", "pass --memory-limit (the container's limit) to compare"}
	case needMiB<<20 > limit:
		return Check{"memory", CheckFail, fmt.Sprintf("%s > the %d MiB limit (%s): a big chart rendered gets the container OOM-killed", detail, limit>>20, source),
			fmt.Sprintf("raise the memory limit to at least %d MiB, or lower render_memory or render_parallel", needMiB)}
	}
	return Check{"memory", CheckOK, fmt.Sprintf("%s fits the %d MiB limit (%s)", detail, limit>>20, source), ""}
}
