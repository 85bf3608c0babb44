package app

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-github/v60/github"

	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/trailers/ledger"
	"github.com/parleyhq/parley/webhooks"
	"github.com/parleyhq/parley/webhooks/store"
)

// Rerequests re-judges the pull requests of a check run or check suite when someone presses
// "Re-run" on GitHub (check_run rerequested, check_suite rerequested).
type Rerequests struct {
	PullRequests *PullRequests
}

// checkEvent is the part of check_run and check_suite payloads the re-run needs. It is decoded
// here rather than into go-github's types because some real payloads carry timestamps such as
// "2018-04-25 20:42:10", which github.Timestamp refuses, and none of them is needed.
type checkEvent struct {
	Action   string `json:"action"`
	CheckRun *struct {
		Name         string     `json:"name"`
		PullRequests []prNumber `json:"pull_requests"`
	} `json:"check_run"`
	CheckSuite *struct {
		PullRequests []prNumber `json:"pull_requests"`
	} `json:"check_suite"`
	Repo         *github.Repository   `json:"repository"`
	Installation *github.Installation `json:"installation"`
}

type prNumber struct {
	Number int `json:"number"`
}

// Handle implements webhooks.Handler for check_run and check_suite deliveries.
func (h *Rerequests) Handle(ctx context.Context, d store.Delivery) error {
	var ev checkEvent
	if err := json.Unmarshal(d.Body, &ev); err != nil {
		return webhooks.Permanent(fmt.Errorf("decode %s delivery %s: %w", d.Event, d.ID, err))
	}
	if ev.Action != "rerequested" {
		return nil
	}
	var prs []prNumber
	switch {
	case d.Event == "check_run" && ev.CheckRun != nil:
		if ev.CheckRun.Name != CheckName {
			return nil
		}
		prs = ev.CheckRun.PullRequests
	case d.Event == "check_suite" && ev.CheckSuite != nil:
		prs = ev.CheckSuite.PullRequests
	default:
		return nil
	}
	repo, inst := ev.Repo, ev.Installation.GetID()
	if repo == nil || inst == 0 {
		return webhooks.Permanent(fmt.Errorf("%s delivery %s lacks the repository or installation", d.Event, d.ID))
	}
	gh, err := h.PullRequests.Installations.Client(inst)
	if err != nil {
		return err
	}
	for _, ref := range prs {
		// The check's pull request entries are stubs; read the pull request itself.
		pr, _, err := gh.PullRequests.Get(ctx, repo.GetOwner().GetLogin(), repo.GetName(), ref.Number)
		if err != nil {
			return fmt.Errorf("%s#%d: %w", repo.GetFullName(), ref.Number, err)
		}
		if pr.GetState() != "open" {
			continue
		}
		if _, err := h.PullRequests.Judge(ctx, Target{Installation: inst, Owner: repo.GetOwner().GetLogin(), Repo: repo.GetName(),
			FullName: repo.GetFullName(), CloneURL: repo.GetCloneURL(), DefaultBranch: repo.GetDefaultBranch(), PR: pr}); err != nil {
			return err
		}
	}
	return nil
}

// Pushes keep each repository's ledger current: a push to the default branch fetches it and
// updates the ledger, so the next pull request is judged against up-to-date claims.
type Pushes struct {
	PullRequests *PullRequests
	// Drift, if set, judges its gated fields again when its GitOps branch moves.
	Drift *Drift
}

// Handle implements webhooks.Handler for push deliveries.
func (h *Pushes) Handle(ctx context.Context, d store.Delivery) error {
	var ev github.PushEvent
	if err := json.Unmarshal(d.Body, &ev); err != nil {
		return webhooks.Permanent(fmt.Errorf("decode push delivery %s: %w", d.ID, err))
	}
	repo := ev.GetRepo()
	if repo == nil || ev.GetInstallation().GetID() == 0 {
		return webhooks.Permanent(fmt.Errorf("push delivery %s lacks the repository or installation", d.ID))
	}
	if ev.GetDeleted() {
		return nil
	}
	if h.Drift != nil {
		// A GitOps branch moved: its policy or Git's values may have changed, and with them the
		// verdicts behind Parley's gates.
		if err := h.Drift.Pushed(ctx, repo.GetFullName(), repo.GetDefaultBranch(), ev.GetRef()); err != nil {
			return fmt.Errorf("%s: judge gated fields again: %w", repo.GetFullName(), err)
		}
	}
	if ev.GetRef() != "refs/heads/"+repo.GetDefaultBranch() {
		return nil
	}
	token, err := h.PullRequests.Installations.Token(ctx, ev.GetInstallation().GetID())
	if err != nil {
		return err
	}
	dir, unlock, err := h.PullRequests.Repos.Sync(ctx, repo.GetFullName(), repo.GetCloneURL(), token)
	if err != nil {
		return err
	}
	led, err := reconcile.OpenLedger(dir, repo.GetDefaultBranch(), repoPath(h.PullRequests.PolicyPath), ledger.Options{})
	if err != nil {
		unlock()
		return fmt.Errorf("%s: open ledger: %w", repo.GetFullName(), err)
	}
	stats, err := led.Update(ctx, repo.GetDefaultBranch())
	led.Close()
	unlock()
	if err != nil {
		return fmt.Errorf("%s: update ledger: %w", repo.GetFullName(), err)
	}
	if stats.Claims == 0 && !stats.Rebuilt {
		return nil // no claim changed: no verdict can have changed
	}
	// Git's claims changed: re-judge the open pull requests against them. Publishing writes only
	// where a verdict actually changed.
	gh, err := h.PullRequests.Installations.Client(ev.GetInstallation().GetID())
	if err != nil {
		return err
	}
	owner, name := repo.GetOwner().GetLogin(), repo.GetName()
	if owner == "" {
		owner = repo.GetOwner().GetName() // push payloads name the owner this way
	}
	opts := &github.PullRequestListOptions{State: "open", Base: repo.GetDefaultBranch(), ListOptions: github.ListOptions{PerPage: 100}}
	for {
		prs, resp, err := gh.PullRequests.List(ctx, owner, name, opts)
		if err != nil {
			return fmt.Errorf("%s: list open pull requests: %w", repo.GetFullName(), err)
		}
		for _, pr := range prs {
			if _, err := h.PullRequests.Judge(ctx, Target{Installation: ev.GetInstallation().GetID(), Owner: owner, Repo: name,
				FullName: repo.GetFullName(), CloneURL: repo.GetCloneURL(), DefaultBranch: repo.GetDefaultBranch(), PR: pr}); err != nil {
				return err
			}
		}
		if resp == nil || resp.NextPage == 0 {
			return nil
		}
		opts.Page = resp.NextPage
	}
}

// Installations events set repositories up and forget them: when the App is uninstalled or a
// repository is removed from the installation, its clone and ledger are deleted.
type InstallationEvents struct {
	Repos interface{ Forget(fullName string) error }
}

// Handle implements webhooks.Handler for installation and installation_repositories deliveries.
func (h *InstallationEvents) Handle(ctx context.Context, d store.Delivery) error {
	var gone []string
	switch d.Event {
	case "installation":
		var ev github.InstallationEvent
		if err := json.Unmarshal(d.Body, &ev); err != nil {
			return webhooks.Permanent(fmt.Errorf("decode installation delivery %s: %w", d.ID, err))
		}
		if ev.GetAction() == "deleted" {
			for _, r := range ev.Repositories {
				gone = append(gone, r.GetFullName())
			}
		}
	case "installation_repositories":
		var ev github.InstallationRepositoriesEvent
		if err := json.Unmarshal(d.Body, &ev); err != nil {
			return webhooks.Permanent(fmt.Errorf("decode installation_repositories delivery %s: %w", d.ID, err))
		}
		for _, r := range ev.RepositoriesRemoved {
			gone = append(gone, r.GetFullName())
		}
	}
	for _, name := range gone {
		if err := h.Repos.Forget(name); err != nil {
			return err
		}
	}
	return nil
}
