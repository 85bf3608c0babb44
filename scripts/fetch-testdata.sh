#!/usr/bin/env bash
# Fetches the pinned npm packages whose GitHub artifacts some tests read, into .cache/npm/ (ignored
# by git): @octokit/webhooks-examples (GitHub's own example webhook payloads), @octokit/openapi
# (GitHub's REST API description) and mermaid (the library GitHub draws Mermaid blocks with, which
# the browser test draws the sticky comment's timelines with); and installs with its dependencies, into .cache/npm-install/, the
# Model Context Protocol's TypeScript SDK (@modelcontextprotocol/sdk, whose client the parley mcp
# tests run). Tests fetch them on first use themselves (needs npm; without it they skip); this
# fetches them ahead, e.g. to fill the cache on a machine with npm. Idempotent: a version already
# cached is not fetched again. The pins live in internal/npmdata/npmdata.go; change
# one there and the next run fetches the new version beside the old one.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./internal/npmdata/cmd/fetch-testdata
