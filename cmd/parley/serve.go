package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/app"
	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/internal/sqldb"
	"github.com/parleyhq/parley/webhooks/store"
)

func newServeCmd() *cobra.Command {
	var cfgPath string
	cmd := &cobra.Command{
		Use:   "serve [--config FILE]",
		Short: "Run the GitHub App: receive webhooks, judge pull requests, publish verdicts",
		Long: `Serve runs Parley's GitHub App. It answers GitHub's webhooks at POST /webhooks/github (each
delivery verified against every configured webhook secret and stored durably before the 2xx),
judges pull requests in worker goroutines, and publishes one check run and one sticky comment per
pull request. /healthz, /readyz and /metrics serve operations, on metrics_listen too, where none
of the intake's connection caps count. SIGTERM drains: no new deliveries, in-flight ones finish
within shutdown_grace, unfinished ones resume on the next start. What a client without credentials
can hold (timeouts, connections, failed authentications) is bounded by the keys below
(docs/security.md).

What a repository holds is read within budgets (docs/security.md; max_file_size ... render_parallel
below): by default files up to 8 MiB, 20,000 changed fields a file and 50,000 a pull request,
values up to 64 KiB; each Helm chart renders, and each kustomization a GitOps manager applies is
built, in a child process (this binary, re-executed) for at most 30s and 512 MiB, two at a time.
What is over a budget is named in the verdict's problems, not judged.

Configuration comes from an HCL file (--config) and then the environment, which overrides it:

` + config.Help(),
		Example: `  PARLEY_APP_ID=1234 PARLEY_PRIVATE_KEY_FILE=app.pem PARLEY_WEBHOOK_SECRETS=s3cret parley serve
  PARLEY_APP_DIR=/var/lib/parley/app parley serve   # no App yet: register it at /setup (token in the log)
  parley serve --config /etc/parley/parley.hcl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cfgPath, os.Getenv)
			if errors.Is(err, config.ErrNoApp) {
				// No App yet and an app_dir to put one in: register it at /setup, then serve with it.
				log := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: cfg.LogLevel}))
				if err := setupForServe(cmd.Context(), cfg.Listen, cfg.GitHubURL, cfg.PublicURL, cfg.AppDir, log); err != nil {
					return err
				}
				cfg, err = config.Load(cfgPath, os.Getenv)
			}
			if err != nil {
				return usageErr(err)
			}
			if cfg.RenderWorker, err = renderWorker(); err != nil {
				return err
			}
			log := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: cfg.LogLevel}))
			// Serve ignores variables it does not read; a misspelt one is said, not silently dropped.
			// A warning, not a refusal: other parley commands read PARLEY_ variables of their own
			// (PARLEY_TOKEN), which a shell may hold while it starts serve.
			for _, name := range config.UnreadEnv(os.Environ()) {
				log.Warn("environment variable is no setting of parley serve: misspelt or removed? parley serve --help lists them", "variable", name)
			}
			srv, err := app.NewServer(cmd.Context(), cfg, log)
			if err != nil {
				return err
			}
			return srv.Run(cmd.Context(), nil)
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "HCL configuration file (keys listed above)")
	return cmd
}

// deliveryStore is serve's delivery queue, SQLite's or PostgreSQL's, as parley deliveries uses it.
type deliveryStore interface {
	store.Deliveries
	Close() error
}

func newDeliveriesCmd() *cobra.Command {
	var storePath string
	openStore := func(cmd *cobra.Command) (deliveryStore, error) {
		if storePath == "" {
			storePath = os.Getenv("PARLEY_STORE")
		}
		if storePath == "" {
			storePath = "parley.db"
		}
		if err := sqldb.CheckTarget(storePath); err != nil {
			return nil, usageErr(err)
		}
		if sqldb.IsPostgres(storePath) {
			return store.OpenPostgres(cmd.Context(), storePath, store.PostgresOptions{MaxConns: 2})
		}
		if _, err := os.Stat(storePath); err != nil {
			return nil, usageErr(fmt.Errorf("store %s: %w (point --store at parley serve's database)", storePath, err))
		}
		return store.Open(cmd.Context(), storePath, store.Options{})
	}
	cmd := &cobra.Command{
		Use:   "deliveries",
		Short: "List and replay deliveries that failed every attempt (the dead-letter list)",
		Long: `Deliveries inspects the durable store of parley serve. A delivery whose handling failed on every
attempt, or failed permanently, is kept as a dead letter; list shows them with their last error, and
replay puts one (or all) back in the queue, with its attempts reset, once the cause is fixed.`,
		Example: `  parley deliveries list --store /var/lib/parley/parley.db
  PARLEY_STORE=postgres://parley@db.internal/parley parley deliveries list   # password from PGPASSWORD
  parley deliveries replay github 72d3162e-cc78-11e3-81ab-4c9367dc0958
  parley deliveries replay --all`,
	}
	cmd.PersistentFlags().StringVar(&storePath, "store", "", "the store: a SQLite file or a postgres:// URL (default $PARLEY_STORE, else parley.db)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List dead-lettered deliveries",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := openStore(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			dead, err := st.DeadLetters(cmd.Context())
			if err != nil {
				return err
			}
			stats, err := st.Stats(cmd.Context(), time.Now())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%d pending, %d dead\n", stats.Pending, len(dead))
			if len(dead) == 0 {
				return nil
			}
			tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SOURCE\tID\tEVENT\tRECEIVED\tATTEMPTS\tLAST ERROR")
			for _, d := range dead {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", d.Source, d.ID, d.Event, d.ReceivedAt.UTC().Format(time.RFC3339), d.Attempts, d.LastError)
			}
			return tw.Flush()
		},
	}
	var all bool
	replay := &cobra.Command{
		Use:   "replay [SOURCE ID | --all]",
		Short: "Put dead-lettered deliveries back in the queue",
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) == 2) || (!all && len(args) != 2) {
				return usageErr(errors.New("give SOURCE and ID of one delivery, or --all"))
			}
			st, err := openStore(cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			keys := []store.Key{}
			if all {
				dead, err := st.DeadLetters(cmd.Context())
				if err != nil {
					return err
				}
				for _, d := range dead {
					keys = append(keys, store.Key{Source: d.Source, ID: d.ID})
				}
			} else {
				keys = append(keys, store.Key{Source: args[0], ID: args[1]})
			}
			for _, k := range keys {
				if err := st.Replay(cmd.Context(), k, time.Now()); err != nil {
					if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotDead) {
						return usageErr(err)
					}
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "replaying %s %s\n", k.Source, k.ID)
			}
			return nil
		},
	}
	replay.Flags().BoolVar(&all, "all", false, "replay every dead-lettered delivery")
	cmd.AddCommand(list, replay)
	return cmd
}
