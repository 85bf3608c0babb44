package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/app/mcptools"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/agentstore"
	"github.com/parleyhq/parley/policy"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/reconcile/driftstate"
	"github.com/parleyhq/parley/reconcile/gitops"
)

func newMCPCmd() *cobra.Command {
	var dir, as, statePath, policyPath, at string
	var render *renderFlags
	cmd := &cobra.Command{
		Use:   "mcp --repo DIR --as SOURCE:ID [--state FILE] [--policy FILE]",
		Short: "Serve the Model Context Protocol on stdio: AI agents ask before they change infrastructure",
		Long: `Mcp serves Parley's tools over the Model Context Protocol on standard input and output, for an AI
agent (an MCP client) that runs beside a local clone of the GitOps repository. The client starts
this command and talks JSON-RPC to it; standard output is the protocol, and logs go to standard
error only.

The tools (docs/agents.md):
  propose_change  ask before changing a field: accepted (make the change; the claim stands until it
                  expires) or refused (do not make it; the answer says who holds the field, why and
                  until when)
  yield_field     give a field up (a proposal of a yield claim)
  explain_field   the verdict on a field as it stands, with every rule's outcome
  list_claims     for the fields matching a pattern, Git's claim and the standing live claims

Every claim is judged as the identity --as SOURCE:ID (the identity the agent's changes carry in
CloudTrail or the audit log, so the change that follows is recognised as the one it asked for),
against --repo's default branch: its ledger and .parley/policy.hcl (or --policy FILE), as parley
propose --repo judges. Accepted claims are recorded in the drift state --state names (the file
parley ingest --state keeps, so the events that follow find them), or in memory and forgotten when
the server stops. The repository is read again on every call: new commits are seen at once.
Nothing is written to the repository.

--at fixes the clock (an RFC 3339 time) for replays and tests; by default claims are judged now.

` + renderHelp + `

To use it from an MCP client, add a server entry to the client's configuration (the mcpServers
object of Claude Desktop's, Cursor's or VS Code's MCP settings; paths absolute):

  {
    "mcpServers": {
      "parley": {
        "command": "parley",
        "args": ["mcp", "--repo", "/srv/infra",
                 "--as", "aws-principal:arn:aws:iam::123456789012:role/kafka-scaling-agent",
                 "--state", "/srv/parley/drift.db"]
      }
    }
  }`,
		Example: `  parley mcp --repo ./infra --as aws-principal:arn:aws:iam::123456789012:role/kafka-scaling-agent
  parley mcp --repo /srv/infra --as k8s-user:system:serviceaccount:finops:cost-optimizer --state /srv/parley/drift.db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if as == "" {
				return usageErr(errors.New("--as SOURCE:ID is required: the identity the agent's claims are judged as"))
			}
			id, err := agentstore.ParseIdentity(as)
			if err != nil {
				return usageErr(fmt.Errorf("--as: %w", err))
			}
			var fixed time.Time
			if at != "" {
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return usageErr(fmt.Errorf("--at %q: want an RFC 3339 time", at))
				}
				fixed = t.UTC()
			}
			var pol *policy.Policy
			if policyPath != "" {
				if pol, err = policy.LoadFile(policyPath); err != nil {
					return findingsErr(err)
				}
			}
			helm, closeWorkers, err := render.renderer()
			if err != nil {
				return err
			}
			defer closeWorkers()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			b, err := openLocalBackend(cmd, dir, statePath, id, pol, fixed, log, helm)
			if err != nil {
				return err
			}
			defer b.Close()
			var transport mcp.Transport = &mcp.StdioTransport{}
			if in, out := cmd.InOrStdin(), cmd.OutOrStdout(); in != os.Stdin || out != os.Stdout {
				transport = &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}}
			}
			log.Info("parley mcp: serving on stdio", "repository", b.repository, "branch", b.repo.branch, "identity", id.String(),
				"state", b.statePath)
			err = mcptools.NewServer(b, parleyVersion()).Run(ctx, transport)
			switch {
			case ctx.Err() != nil:
				log.Info("parley mcp: stopped", "reason", context.Cause(ctx).Error())
				return nil
			case err != nil && !errors.Is(err, mcp.ErrConnectionClosed) && !errors.Is(err, io.EOF):
				return fmt.Errorf("mcp: %w", err)
			}
			log.Info("parley mcp: the client closed the connection")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "repo", ".", "the GitOps repository to judge against (its default branch's ledger and policy)")
	f.StringVar(&as, "as", "", "the agent's identity, SOURCE:ID (e.g. aws-principal:arn:aws:iam::123456789012:role/kafka-scaling-agent)")
	f.StringVar(&statePath, "state", "", "drift state file whose standing claims are weighed and where accepted claims are recorded (default: in memory)")
	f.StringVar(&policyPath, "policy", "", "policy file to use instead of the default branch's .parley/policy.hcl")
	f.StringVar(&at, "at", "", "judge at this RFC 3339 time instead of now (replays, tests)")
	render = addRenderFlags(cmd)
	return cmd
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// parleyVersion is the module version the binary was built from, or "devel".
func parleyVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// localBackend judges the MCP tools' claims against a local repository: its default branch, a
// drift state, and a Reconciler without a Writer (nothing is written to Git), as parley propose
// --repo does. Calls are judged one at a time.
type localBackend struct {
	mu         sync.Mutex
	repo       *repoState
	repository string // owner/name, as answers name it
	statePath  string
	st         *driftstate.DB
	rec        *reconcile.Reconciler
	snaps      reconcile.SnapshotCache
	pol        *policy.Policy // nil: the branch's
	id         core.Identity
	at         time.Time // zero: the wall clock
	log        *slog.Logger
}

// helm renders the repository's charts and builds its kustomizations when its snapshots are
// discovered (a gitops.RenderProcess, under the --render-* budgets); nil does it in this process.
func openLocalBackend(cmd *cobra.Command, dir, statePath string, id core.Identity, pol *policy.Policy, at time.Time, log *slog.Logger, helm gitops.HelmRenderer) (*localBackend, error) {
	ctx := cmd.Context()
	repo, err := openRepo(cmd, dir)
	if err != nil {
		return nil, err
	}
	b := &localBackend{repo: repo, repository: localRepositoryName(dir), statePath: statePath, pol: pol, id: id, at: at, log: log}
	b.snaps.Helm = helm
	if b.statePath == "" {
		b.statePath = ":memory:"
	}
	if b.st, err = driftstate.Open(ctx, b.statePath); err != nil {
		repo.Close()
		return nil, err
	}
	b.rec = &reconcile.Reconciler{State: b.st, Now: b.Now}
	// Read the branch once now, so that a repository that cannot be judged fails at start.
	if _, err := b.snapshot(ctx); err != nil {
		b.Close()
		if errors.Is(err, reconcile.ErrNoPolicy) {
			return nil, usageErr(err)
		}
		return nil, err
	}
	return b, nil
}

func (b *localBackend) Close() {
	b.st.Close()
	b.repo.Close()
}

// Now is the time claims are made and judged at (mcptools.Clock).
func (b *localBackend) Now() time.Time {
	if !b.at.IsZero() {
		return b.at
	}
	return time.Now().UTC()
}

func (b *localBackend) Identity() core.Identity { return b.id }

func (b *localBackend) snapshot(ctx context.Context) (reconcile.Snapshot, error) {
	snap, err := b.snaps.Load(ctx, b.repo.dir, b.repo.branch, policy.DefaultFile, b.repo.Ledger, b.pol)
	if errors.Is(err, reconcile.ErrNoPolicy) {
		return snap, fmt.Errorf("%s: %w on %s: nothing can be judged without one (parley init writes one)", b.repo.dir, err, b.repo.branch)
	}
	return snap, err
}

// check names the repository a call asks for: "" or this one.
func (b *localBackend) check(repository string) error {
	if repository != "" && repository != b.repository {
		return fmt.Errorf("repository %q: %w; this server judges %s (omit repository to use it)", repository, mcptools.ErrUnknownRepository, b.repository)
	}
	return nil
}

func (b *localBackend) Propose(ctx context.Context, repository, key string, claims []core.Claim) (mcptools.Proposal, error) {
	if err := b.check(repository); err != nil {
		return mcptools.Proposal{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	snap, err := b.snapshot(ctx)
	if err != nil {
		return mcptools.Proposal{}, err
	}
	pid := agentstore.ProposalID("", "")
	if key != "" {
		pid = agentstore.ProposalID(b.id.String(), key)
	}
	judged, err := b.rec.Propose(ctx, snap, pid, claims)
	if err != nil {
		return mcptools.Proposal{}, err
	}
	for _, p := range judged {
		b.log.Info("proposal judged", "proposal", pid, "field", p.Claim.Field.String(), "value", p.Claim.Value.String(),
			"accepted", p.Accepted, "decision", string(p.Verdict.Decision), "rule", p.Verdict.Rule)
	}
	return mcptools.Proposal{ID: pid, Repository: b.repository, Results: judged}, nil
}

func (b *localBackend) Explain(ctx context.Context, repository string, f core.Field) (core.Verdict, error) {
	if err := b.check(repository); err != nil {
		return core.Verdict{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	snap, err := b.snapshot(ctx)
	if err != nil {
		return core.Verdict{}, err
	}
	return b.rec.Explain(ctx, snap, f)
}

func (b *localBackend) Claims(ctx context.Context, repository string, p core.FieldPattern, limit int) ([]reconcile.Holders, bool, error) {
	if err := b.check(repository); err != nil {
		return nil, false, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	snap, err := b.snapshot(ctx)
	if err != nil {
		return nil, false, err
	}
	return b.rec.Claims(ctx, snap, p, limit)
}
