package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/internal/agentstore"
	"github.com/parleyhq/parley/internal/sqldb"
)

func newTokensCmd() *cobra.Command {
	var dbPath string
	cmd := &cobra.Command{
		Use:   "tokens",
		Short: "Create, list and revoke the bearer tokens agents send to the proposals API",
		Long: `Tokens manages the bearer tokens agents authenticate with to parley serve's proposals API
(POST /v1/proposals, and parley propose --server). Each token is mapped to the identity the policy
knows the agent by (SOURCE:ID, e.g. aws-principal:arn:aws:iam::123456789012:role/kafka-agent): a
proposal sent with it is judged as that identity's claim. Each token names the repositories it may
act on (--repository); parley serve answers 403 to it anywhere else (/v1/proposals, /v1/plans and
/mcp alike).

The tokens live in agents.db, which parley serve keeps beside its store (in the directory of
PARLEY_STORE, parley.db in the working directory by default), or, when the store is PostgreSQL, in
that database, shared by every replica. --db names it; by default it is
agents.db in PARLEY_STORE's directory when PARLEY_STORE is set, else agents.db in the working
directory. Only the SHA-256 of a token's secret is kept: a token is printed once, when it is
created, and cannot be shown again. Revoking one refuses it from the next request on.`,
		Example: `  TOKEN=$(parley tokens create kafka-agent --identity aws-principal:arn:aws:iam::123456789012:role/kafka-agent --repository acme/infra --db /var/lib/parley/agents.db)
  parley tokens list --db /var/lib/parley/agents.db
  parley tokens revoke kafka-agent --db /var/lib/parley/agents.db`,
	}
	cmd.PersistentFlags().StringVar(&dbPath, "db", "", "the agent store: agents.db beside parley serve's store, or its postgres:// URL (default: $PARLEY_STORE when it is PostgreSQL, else agents.db in its directory, else in the working directory)")
	path := func() string {
		if dbPath != "" {
			return dbPath
		}
		if s := os.Getenv("PARLEY_STORE"); sqldb.IsPostgres(s) {
			return s // the replicas' shared database holds the tokens
		} else if s != "" {
			return filepath.Join(filepath.Dir(s), "agents.db")
		}
		return "agents.db"
	}
	// open opens the store; a missing SQLite file is an error unless create says it may be made.
	open := func(cmd *cobra.Command, create bool) (*tokenStore, string, error) {
		p := path()
		if err := sqldb.CheckTarget(p); err != nil {
			return nil, sqldb.RedactAny(p), usageErr(err)
		}
		if s := os.Getenv("PARLEY_STORE"); dbPath == "" && s != "" {
			// agents.db is put beside PARLEY_STORE: refuse a value that is no path before
			// it becomes one.
			if err := sqldb.CheckTarget(s); err != nil {
				return nil, sqldb.RedactAny(s), usageErr(fmt.Errorf("PARLEY_STORE: %w", err))
			}
		}
		if sqldb.IsPostgres(p) {
			name := sqldb.Redact(p)
			pool, sdb, err := sqldb.OpenPostgres(cmd.Context(), p, 2)
			if err != nil {
				return nil, name, err
			}
			closePool := func() { sdb.Close(); pool.Close() }
			db, err := agentstore.OpenPostgres(cmd.Context(), sdb, name)
			if err != nil {
				closePool()
				return nil, name, err
			}
			return &tokenStore{DB: db, closePool: closePool}, name, nil
		}
		if create {
			dir := filepath.Dir(p)
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return nil, p, usageErr(fmt.Errorf("--db %s: no directory %s to create it in", p, dir))
			}
		} else if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			return nil, p, usageErr(fmt.Errorf("--db %s: no such file (parley serve keeps agents.db beside its store; parley tokens create makes it)", p))
		} else if err != nil {
			return nil, p, usageErr(fmt.Errorf("--db %s: %w", p, err))
		}
		db, err := agentstore.Open(cmd.Context(), p)
		if err != nil {
			return nil, p, err
		}
		return &tokenStore{DB: db}, p, nil
	}

	var identity string
	var repositories []string
	create := &cobra.Command{
		Use:   "create NAME --identity SOURCE:ID --repository OWNER/NAME...",
		Short: "Make a token for an agent and print it, once",
		Long: `Create makes a token named NAME (1 to 63 of A-Z a-z 0-9 . _ -, unique in the store) for the
identity SOURCE:ID, allowed to act on the repositories named with --repository (at least one;
repeat it or separate with commas), and prints the token alone on standard output, so that
TOKEN=$(parley tokens create ...) keeps it. A token made before tokens named their repositories
acts only where parley serve serves a single repository: make a new one to name them. It is not stored and cannot be shown again: give it to the agent now (as the
PARLEY_TOKEN environment variable or a file read with --token-file, never on a command line). The
store is created if it does not exist.`,
		Example: `  parley tokens create kafka-agent --identity aws-principal:arn:aws:iam::123456789012:role/kafka-agent --repository acme/infra > kafka-agent.token`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if identity == "" {
				return usageErr(errors.New("--identity is required: the identity the agent is judged as, SOURCE:ID"))
			}
			id, err := agentstore.ParseIdentity(identity)
			if err != nil {
				return usageErr(fmt.Errorf("--identity: %w", err))
			}
			if len(repositories) == 0 {
				return usageErr(errors.New("--repository is required: the repositories (owner/name) the agent may act on"))
			}
			db, p, err := open(cmd, true)
			if err != nil {
				return err
			}
			defer db.Close()
			token, t, err := db.Create(cmd.Context(), args[0], id, repositories, time.Now())
			if err != nil {
				if !strings.HasPrefix(err.Error(), "agent store ") { // a bad or taken name, not the store failing
					return usageErr(err)
				}
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), token)
			fmt.Fprintf(cmd.ErrOrStderr(), "parley: token %s for %s, acting on %s, created in %s. It is printed once and cannot be shown again:\n"+
				"parley: keep it now (an agent sends it as Authorization: Bearer <token>; parley propose reads PARLEY_TOKEN or --token-file).\n",
				t.Name, t.Identity, strings.Join(t.Repositories, ", "), p)
			return nil
		},
	}
	create.Flags().StringSliceVar(&repositories, "repository", nil, "a repository (owner/name) the agent may act on; repeat it, or separate with commas, for several (required)")
	create.Flags().StringVar(&identity, "identity", "", "the identity the agent is judged as, SOURCE:ID (e.g. aws-principal:arn:aws:iam::123456789012:role/kafka-agent, k8s-user:system:serviceaccount:ops:scaler)")

	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the tokens: name, identity, when created, last used and revoked",
		Long: `List shows every token in the store, revoked ones included, by name: its identity, when it was
created, when it was last used (recorded at most once a minute) and when it was revoked. Secrets are
never shown: the store does not have them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, p, err := open(cmd, false)
			if err != nil {
				return err
			}
			defer db.Close()
			ts, err := db.List(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				docs := make([]tokenJSON, 0, len(ts))
				for _, t := range ts {
					docs = append(docs, tokenDoc(t))
				}
				return writeJSON(out, docs)
			}
			if len(ts) == 0 {
				fmt.Fprintf(out, "No tokens in %s.\n", p)
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tIDENTITY\tREPOSITORIES\tCREATED\tLAST USED\tREVOKED")
			for _, t := range ts {
				repos := strings.Join(t.Repositories, ",")
				if repos == "" {
					repos = "(made before tokens named them)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Identity, repos, tokenTime(t.Created, "-"), tokenTime(t.LastUsed, "never"), tokenTime(t.Revoked, "-"))
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print the tokens as JSON (docs/schemas/tokens.schema.json)")

	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke a token: proposals sent with it are refused from now on",
		Long: `Revoke ends the token named NAME (or with the id NAME) at once: the proposals API answers 401 to
it from the next request on. The token stays listed, with when it was revoked. Revoking a token
that is revoked already changes nothing.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, p, err := open(cmd, false)
			if err != nil {
				return err
			}
			defer db.Close()
			ts, err := db.List(cmd.Context())
			if err != nil {
				return err
			}
			var found *agentstore.Token
			for i, t := range ts {
				if t.Name == args[0] || t.ID == args[0] {
					found = &ts[i]
					break
				}
			}
			out := cmd.OutOrStdout()
			switch {
			case found == nil:
				return usageErr(fmt.Errorf("no token named %q in %s (parley tokens list --db %s shows them)", args[0], p, p))
			case !found.Revoked.IsZero():
				fmt.Fprintf(out, "token %s (%s) was revoked already, at %s\n", found.Name, found.Identity, tokenTime(found.Revoked, "-"))
				return nil
			}
			t, err := db.Revoke(cmd.Context(), found.Name, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "revoked token %s (%s) at %s: proposals sent with it are refused from now on\n", t.Name, t.Identity, tokenTime(t.Revoked, "-"))
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

// tokenJSON is one token in parley tokens list --json (docs/schemas/tokens.schema.json): never a
// secret, nor its digest.
type tokenJSON struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	Identity     tokenIdentityJSON `json:"identity"`
	Repositories []string          `json:"repositories,omitempty"`
	Created      string            `json:"created"`
	LastUsed     string            `json:"last_used,omitempty"`
	Revoked      string            `json:"revoked,omitempty"`
}

type tokenIdentityJSON struct {
	Source string `json:"source"`
	ID     string `json:"id"`
}

func tokenDoc(t agentstore.Token) tokenJSON {
	return tokenJSON{ID: t.ID, Name: t.Name, Identity: tokenIdentityJSON{Source: string(t.Identity.Source), ID: t.Identity.ID}, Repositories: t.Repositories,
		Created: tokenTime(t.Created, ""), LastUsed: tokenTime(t.LastUsed, ""), Revoked: tokenTime(t.Revoked, "")}
}

// tokenTime is t in RFC 3339 UTC, or none when t is zero.
func tokenTime(t time.Time, none string) string {
	if t.IsZero() {
		return none
	}
	return t.UTC().Format(time.RFC3339)
}

// tokenStore is the agent store parley tokens opened, with the PostgreSQL pool it opened for it.
type tokenStore struct {
	*agentstore.DB
	closePool func() // nil for SQLite
}

func (t *tokenStore) Close() error {
	err := t.DB.Close()
	if t.closePool != nil {
		t.closePool()
	}
	return err
}
