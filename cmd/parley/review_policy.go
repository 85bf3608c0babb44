package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/app/review"
	"github.com/parleyhq/parley/policy"
)

// policyChange is what a reviewed branch's change to the policy file does, as the App's check run
// and comment show it on a pull request.
type policyChange struct {
	Path string `json:"path"`
	// Invalid is the new policy's errors, or that the branch removes the policy; "" when it parses.
	Invalid string `json:"invalid,omitempty"`
	// Diff is what the new policy changes in the base's ledger; nil when it is invalid.
	Diff *review.PolicyDiff `json:"diff,omitempty"`
}

// reviewPolicyChange reports the branch's change to the policy (nil when it leaves the policy
// alone): the head's policy parsed, and diffed against the base's (pol) over the base's ledger at
// now, as the App does.
func reviewPolicyChange(cmd *cobra.Command, repo *repoState, src *review.GitSource, pol *policy.Policy, now time.Time) (*policyChange, error) {
	ctx := cmd.Context()
	files, err := src.Files(ctx)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(files, func(f review.FileChange) bool {
		return f.Path == policy.DefaultFile || f.PreviousPath == policy.DefaultFile
	}) {
		return nil, nil
	}
	pc := &policyChange{Path: policy.DefaultFile}
	data, ok, err := src.Content(ctx, src.HeadSHA(), policy.DefaultFile)
	if err != nil {
		return nil, fmt.Errorf("read %s at the head: %w", policy.DefaultFile, err)
	}
	if !ok {
		pc.Invalid = policy.DefaultFile + " is removed: without a policy nothing is judged"
		return pc, nil
	}
	next, err := policy.Parse(data, "head:"+policy.DefaultFile)
	if err != nil {
		pc.Invalid = err.Error()
		return pc, nil
	}
	branch, err := repo.Branch(repo.branch)
	if err != nil {
		return nil, err
	}
	d, err := review.DiffPolicy(ctx, pol, next, branch, now)
	if err != nil {
		return nil, err
	}
	pc.Diff = &d
	return pc, nil
}

// conclusion is the branch's conclusion given its fields' (review.PolicyChangeConclusion): offline
// review cannot see approvals, so a valid change to the policy is action_required, as the App's
// check is until a policy owner approves the head.
func (pc *policyChange) conclusion(fields string) string {
	return review.PolicyChangeConclusion(fields, pc.Invalid != "", false)
}

// text is the change to the policy as review prints it.
func (pc *policyChange) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy: this branch changes the policy (%s).", pc.Path)
	if pc.Invalid != "" {
		fmt.Fprintf(&b, " The new policy is invalid:\n  %s\n", strings.ReplaceAll(pc.Invalid, "\n", "\n  "))
		return b.String()
	}
	b.WriteString(" On a pull request the App asks for the approval of a policy owner at its head commit (offline review cannot see approvals).\n")
	for _, line := range review.RenderPolicyDiff(*pc.Diff, 0) {
		fmt.Fprintf(&b, "  %s\n", line)
	}
	return b.String()
}
