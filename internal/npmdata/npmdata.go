// Package npmdata locates the npm packages with GitHub's own artifacts that tests read (example
// webhook payloads, the REST API description). They are pinned here and cached in .cache/npm/<spec>
// at the module root (ignored by git); Dir fetches a package with `npm pack` on first use, so a
// fresh clone needs nothing run before `go test ./...`. Without npm, Dir's error wraps ErrNoNPM
// and tests skip (see Require and FatalOrSkip). Packages tests run, such as the MCP TypeScript
// SDK's client, need their dependencies: InstallDir installs those with `npm install` into
// .cache/npm-install/<spec> (RequireInstalled in tests). scripts/fetch-testdata.sh fetches and
// installs every pinned package ahead.
package npmdata

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Pinned versions, the only place they are written. Change a pin and the next run fetches the new
// version beside the old one.
const (
	WebhooksExamples = "@octokit/webhooks-examples@7.6.1"
	OpenAPI          = "@octokit/openapi@23.0.2"
	// MCPSDK is the Model Context Protocol's TypeScript SDK, whose Client tests run against parley
	// mcp; it is installed with its dependencies (InstallDir), not packed. 1.32.2 is the newest
	// 1.x and needs Node 18 or later.
	MCPSDK = "@modelcontextprotocol/sdk@1.32.2"
	// Mermaid is the diagram library GitHub renders Mermaid code blocks with; the browser test
	// draws the sticky comment's timelines with its browser bundle (dist/mermaid.min.js).
	Mermaid = "mermaid@12.3.0"
)

// Pinned returns every pinned package spec that Dir fetches (Installed lists those InstallDir
// installs).
func Pinned() []string { return []string{WebhooksExamples, OpenAPI, Mermaid} }

// Dir returns the directory of a pinned package (a spec such as WebhooksExamples) in
// .cache/npm/<pkg> at the module root, fetching it with npm first if it is not cached. The error
// wraps ErrNoNPM when the package is not cached and npm is not installed.
func Dir(pkg string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return ensure(root, pkg)
}

// moduleRoot is the nearest directory above the working directory with go.mod and
// scripts/fetch-testdata.sh.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "scripts", "fetch-testdata.sh")); err == nil {
				return dir, nil
			}
		}
		if parent := filepath.Dir(dir); parent == dir {
			return "", fmt.Errorf("no module root with scripts/fetch-testdata.sh above %s", wd)
		}
	}
}

// WebhookExample is one example payload of one event.
type WebhookExample struct {
	Event   string
	Payload json.RawMessage
}

// WebhookExamples returns every example payload GitHub publishes for api.github.com.
func WebhookExamples() ([]WebhookExample, error) {
	dir, err := Dir(WebhooksExamples)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "api.github.com", "index.json"))
	if err != nil {
		return nil, err
	}
	var index []struct {
		Name     string            `json:"name"`
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(b, &index); err != nil {
		return nil, fmt.Errorf("decode %s index: %w", WebhooksExamples, err)
	}
	var out []WebhookExample
	for _, e := range index {
		for _, p := range e.Examples {
			out = append(out, WebhookExample{Event: e.Name, Payload: p})
		}
	}
	return out, nil
}

// PatchedWebhookExample returns GitHub's first example payload of event with the given action (any action
// if action is ""), decoded, passed through patch and encoded again: tests point GitHub's own
// payloads at their repositories this way.
func PatchedWebhookExample(event, action string, patch func(map[string]any)) ([]byte, error) {
	examples, err := WebhookExamples()
	if err != nil {
		return nil, err
	}
	for _, ex := range examples {
		var ev map[string]any
		if ex.Event != event || json.Unmarshal(ex.Payload, &ev) != nil || (action != "" && ev["action"] != action) {
			continue
		}
		patch(ev)
		return json.Marshal(ev)
	}
	return nil, fmt.Errorf("no %s %q example in %s", event, action, WebhooksExamples)
}
