package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/parleyhq/parley/app"
	"github.com/parleyhq/parley/app/config"
)

// cgroupMemoryMax is where a container's memory limit is read (cgroup v2).
const cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

func newDoctorCmd() *cobra.Command {
	var cfgPath, memFlag string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor [--config FILE]",
		Short: "Check that parley serve's configuration works against GitHub, one line per check",
		Long: `Doctor loads serve's configuration the way serve does (--config, then the environment) and
checks it against GitHub: the App's key is accepted (GET /app), the App's webhook is signed and
points at public_url, each installation has the permissions and events Parley needs (app.yml),
each installed repository's policy parses on its default branch and its ledger's include
patterns match files, and the render budgets fit the memory limit: render_parallel ×
(render_memory + 130 MiB a worker) + 256 MiB for serve, against --memory-limit or the cgroup's
memory.max.

Each check prints ok, warn or FAIL, and what to do next when it is not ok. The exit status is 1 if
any check fails, 2 if the configuration itself is invalid.`,
		Example: `  PARLEY_APP_DIR=./parley-app parley doctor
  parley doctor --config /etc/parley/parley.hcl --memory-limit 1536Mi
  kubectl exec deploy/parley -- parley doctor --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cfgPath, os.Getenv)
			if errors.Is(err, config.ErrNoApp) {
				return findingsErr(fmt.Errorf("%w; or: parley app create --public-url URL --dir %s", err, cfg.AppDir))
			}
			if err != nil {
				return usageErr(err)
			}
			limit, source := int64(0), ""
			if memFlag != "" {
				if limit, err = parseMemory(memFlag); err != nil {
					return usageErr(fmt.Errorf("--memory-limit: %w", err))
				}
				source = "--memory-limit"
			} else if b, err := os.ReadFile(cgroupMemoryMax); err == nil {
				if limit, err = parseMemory(string(b)); err != nil {
					limit = 0
				}
				source = cgroupMemoryMax
			}
			checks := app.Doctor(cmd.Context(), cfg, app.DoctorOptions{MemoryLimit: limit, MemorySource: source})
			failed := 0
			for _, c := range checks {
				if c.Status == app.CheckFail {
					failed++
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(map[string]any{"ok": failed == 0, "checks": checks}); err != nil {
					return err
				}
			} else {
				for _, c := range checks {
					fmt.Fprintf(out, "%-4s  %-28s %s\n", c.Status, c.Name, c.Detail)
					if c.Next != "" && c.Status != app.CheckOK {
						fmt.Fprintf(out, "      %-28s next: %s\n", "", c.Next)
					}
				}
			}
			if failed > 0 {
				return findingsErr(fmt.Errorf("doctor: %d of %d checks failed", failed, len(checks)))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "serve's HCL configuration file")
	cmd.Flags().StringVar(&memFlag, "memory-limit", "", "the container's memory limit (bytes, or with Ki, Mi, Gi; max for none); default: "+cgroupMemoryMax)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON")
	return cmd
}

// parseMemory reads a memory limit: bytes, a Kubernetes quantity with a binary suffix (Ki, Mi, Gi,
// Ti) or a decimal one (k, M, G, T), or "max" (cgroup's "no limit"), returned as -1.
func parseMemory(s string) (int64, error) {
	s = strings.TrimSpace(s)
	orig := s
	if s == "max" {
		return -1, nil
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = n, u.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a memory size (bytes, or a number with Ki, Mi, Gi, Ti, k, M, G or T, or max)", orig)
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is too large a memory size", orig)
	}
	return n * mult, nil
}
