package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/policy"
)

// teamsOf finds which of the policy's github_teams a GitHub user is in, through GitHub's team
// membership API, so an identity GitHub vouches for (a verified commit, a merged pull request's
// author) matches an actor by team as well as by login. It lives for one judgement: each login is
// asked about once per team, and a policy naming no team asks nothing.
type teamsOf struct {
	gh    *github.Client
	teams []string // org/team slugs the policy names; a glob cannot be asked about and is left out
	cache map[string][]string
	asked int // membership calls made in this judgement
}

// maxMembershipLookups bounds the team membership calls of one judgement (users × the policy's
// teams). Past it the judgement fails with an error saying so, rather than matching a user GitHub
// vouches for without their teams, which could weigh a field's history wrongly either way.
const maxMembershipLookups = 200

func newTeamsOf(gh *github.Client, pol *policy.Policy) *teamsOf {
	t := &teamsOf{gh: gh, cache: map[string][]string{}}
	seen := map[string]bool{}
	if pol != nil {
		for _, a := range pol.Actors {
			for _, team := range a.Match[core.SourceGitHubTeam] {
				if !strings.Contains(team, "*") && strings.Count(team, "/") == 1 && !seen[team] {
					seen[team] = true
					t.teams = append(t.teams, team)
				}
			}
		}
	}
	return t
}

// withTeams returns id with the teams its GitHub user is an active member of as its Groups; any
// other identity unchanged.
func (t *teamsOf) withTeams(ctx context.Context, id core.Identity) (core.Identity, error) {
	if t == nil || id.Source != core.SourceGitHubUser || id.ID == "" || len(t.teams) == 0 {
		return id, nil
	}
	login := strings.ToLower(id.ID)
	groups, ok := t.cache[login]
	if !ok {
		groups = []string{}
		if t.asked+len(t.teams) > maxMembershipLookups {
			return id, fmt.Errorf("teams of %s: more than %d GitHub team membership lookups in one judgement (%d teams in the policy)", id.ID, maxMembershipLookups, len(t.teams))
		}
		t.asked += len(t.teams)
		for _, team := range t.teams {
			in, err := namedAmong(ctx, t.gh, id.ID, []string{team})
			if err != nil {
				return id, fmt.Errorf("teams of %s: %w", id.ID, err)
			}
			if in {
				groups = append(groups, team)
			}
		}
		t.cache[login] = groups
	}
	id.Groups = groups
	return id, nil
}
