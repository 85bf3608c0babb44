package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/parleyhq/parley/app"
	"github.com/parleyhq/parley/app/config"
	"github.com/parleyhq/parley/app/report"
	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/internal/npmdata"
	"github.com/parleyhq/parley/reconcile"
	"github.com/parleyhq/parley/trailers/ledger"
)

// chromium finds the browser, or skips (fails under CI=true, where .ci/run installs it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("PARLEY_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed: scripts/system-packages.sh installs it")
	}
	t.Skip("chromium is not installed (sudo apt-get install chromium)")
	return ""
}

// artefacts is where the test keeps its screenshots: $PARLEY_ARTIFACTS, else .cache/artifacts in
// the checkout (ignored by Git).
func artefacts(t *testing.T) string {
	dir := os.Getenv("PARLEY_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", ".cache", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// page is what one visit saw: the document's status and URL, and the console errors, warnings
// and uncaught exceptions raised while it loaded.
type page struct {
	status int64
	url    string
	errors []string
}

// visit opens u in a new tab of the browser, waits until it has loaded, then runs then (if not
// nil) on the tab.
func visit(t *testing.T, browser context.Context, u string, then func(ctx context.Context) error) page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	defer cancel()
	ctx, stop := context.WithTimeout(ctx, 60*time.Second)
	defer stop()
	var mu sync.Mutex
	var p page
	err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				p.errors = append(p.errors, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			p.errors = append(p.errors, "exception: "+e.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				p.errors = append(p.errors, "browser log: "+e.Entry.Text+" "+e.Entry.URL)
			}
		}
	})
	if err != nil {
		t.Fatalf("listen to %s: %v", u, err)
	}
	resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(u))
	if err != nil {
		t.Fatalf("visit %s: %v", u, err)
	}
	if then != nil {
		if err := then(ctx); err != nil {
			t.Fatalf("on %s: %v", u, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	p.status, p.url = resp.Status, resp.URL
	return p
}

// TestFieldPageInChromium: parley serve with the details pages, the demo repository hosted on the
// fake GitHub, Chromium as the person.
func TestFieldPageInChromium(t *testing.T) {
	exe := chromium(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The demo repository, hosted as acme/infra, private; alice may read it, bob may not.
	work := filepath.Join(t.TempDir(), "demo")
	res, err := demo.Build(work)
	if err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(t.TempDir(), "infra.git")
	if out, err := exec.Command("git", "clone", "-q", "--bare", work, bare).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	gh, pemKey := fakeApp(t)
	gh.SetOAuthApp("Iv1.parley", "oauth-secret")
	gh.SetInstallation("acme/infra", 5)
	gh.SetRepository("acme/infra", map[string]any{"clone_url": bare, "default_branch": res.Branch, "private": true})
	gh.SetPermission("acme/infra", "alice", "read")

	// The claims the replicas field's timeline must draw: its history in the ledger.
	replicas := core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	led, err := reconcile.OpenLedger(res.Dir, res.Branch, "", ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := led.Update(ctx, res.Branch); err != nil {
		t.Fatal(err)
	}
	hist, err := led.History(replicas)
	led.Close()
	if err != nil || len(hist) == 0 {
		t.Fatalf("the demo's replicas history: %v %v", hist, err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	public := fmt.Sprintf("http://localhost:%d", port) // a secure context to Chromium: Secure cookies work
	env := map[string]string{"PARLEY_APP_ID": "99", "PARLEY_PRIVATE_KEY": string(pemKey), "PARLEY_WEBHOOK_SECRETS": "hook",
		"PARLEY_GITHUB_URL": gh.URL + "/api/v3/", "PARLEY_STORE": filepath.Join(t.TempDir(), "parley.db"), "PARLEY_LISTEN": fmt.Sprintf("127.0.0.1:%d", port),
		"PARLEY_PUBLIC_URL": public, "PARLEY_OAUTH_CLIENT_ID": "Iv1.parley", "PARLEY_OAUTH_CLIENT_SECRET": "oauth-secret"}
	cfg, err := config.Load("", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	srv, err := app.NewServer(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	done, ready := make(chan error, 1), make(chan string, 1)
	go func() { done <- srv.Run(ctx, func(a string) { ready <- a }) }()
	<-ready
	defer func() { cancel(); <-done }()

	alloc, stopAlloc := chromedp.NewExecAllocator(ctx, chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.WindowSize(1280, 1000))
	defer stopAlloc()
	fieldURL := public + app.FieldPage("acme/infra", replicas)

	// Nobody signed in to GitHub: the page is not shown; the way ends at GitHub's sign-in.
	gh.SignIn("")
	browser, stopBrowser := chromedp.NewContext(alloc)
	defer stopBrowser()
	if err := chromedp.Do(browser); err != nil { // start the browser, with no timeout: it lives as long as this context
		t.Fatal(err)
	}
	if p := visit(t, browser, fieldURL, nil); p.status == 200 || !strings.Contains(p.url, "/login/oauth/authorize") {
		t.Fatalf("without signing in: %d at %s", p.status, p.url)
	}

	// Alice signs in with GitHub and sees the field's page: no console error, the timeline draws
	// every claim of the field's history.
	gh.SignIn("alice")
	var claims int
	var h1 string
	var shot []byte
	p := visit(t, browser, fieldURL, func(ctx context.Context) (err error) {
		if claims, err = chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg .claim").length`)); err != nil {
			return err
		}
		if h1, err = chromedp.Run(ctx, chromedp.Text("h1")); err != nil {
			return err
		}
		shot, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
		return err
	})
	if p.status != 200 || p.url != fieldURL {
		t.Fatalf("alice: %d at %s", p.status, p.url)
	}
	if len(p.errors) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(p.errors, "\n"))
	}
	if claims != len(hist) || h1 != replicas.String() {
		t.Errorf("the timeline draws %d claims under %q; the ledger holds %d on %s", claims, h1, len(hist), replicas)
	}
	path := filepath.Join(artefacts(t), "field-replicas.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)

	// On a phone's screen the page does not scroll sideways: wide tables and the picture scroll
	// inside their own regions.
	var overflow bool
	visit(t, browser, fieldURL, func(ctx context.Context) (err error) {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(3), chromedp.EmulateMobile)); err != nil {
			return err
		}
		overflow, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
		if err == nil {
			shot, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
		}
		return err
	})
	if overflow {
		t.Error("on a 390 px wide screen the page scrolls sideways")
	}
	if err := os.WriteFile(filepath.Join(artefacts(t), "field-replicas-phone.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}

	// The page carries its sign-in: the index opens without another trip to GitHub.
	authorize, _ := gh.OAuthCalls()
	if p := visit(t, browser, public+"/ui/acme/infra", nil); p.status != 200 || len(p.errors) > 0 {
		t.Errorf("alice's index: %d %v", p.status, p.errors)
	}
	if again, _ := gh.OAuthCalls(); again != authorize {
		t.Error("the index sent alice to GitHub again")
	}

	// Bob signs in with GitHub in a browser of his own, but may not read the repository: 404.
	gh.SignIn("bob")
	bobs, stopBob := chromedp.NewContext(alloc)
	defer stopBob()
	var text string
	if p := visit(t, bobs, fieldURL, func(ctx context.Context) (err error) {
		text, err = chromedp.Run(ctx, chromedp.Text("body"))
		return err
	}); p.status != 404 || strings.Contains(text, "replicas") {
		t.Errorf("bob: %d at %s: %q", p.status, p.url, text)
	}
}

// TestCommentTimelineDrawsInMermaid: the Mermaid timeline the sticky comment carries is drawn by
// the Mermaid library GitHub uses (its browser bundle from npm), in Chromium: it parses, and the
// chart has a bar per claim and the verdict's milestone.
func TestCommentTimelineDrawsInMermaid(t *testing.T) {
	exe := chromium(t)
	dir, err := npmdata.Dir(npmdata.Mermaid)
	if err != nil {
		npmdata.FatalOrSkip(t, err)
	}
	at := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	f := core.K8sField("apps", "Deployment", "prod", "web", "/spec/replicas")
	val := func(n int) core.Value { v, _ := core.JSONValue(n); return v }
	hpa := core.Claim{Field: f, Actor: core.Actor{Name: "hpa"}, Value: val(7), Intent: core.IntentAvailability, At: at.Add(-10 * time.Minute)}
	git := core.Claim{Field: f, Actor: core.Actor{Name: "platform: team#1"}, Value: val(3), Intent: core.IntentBaseline, At: at.Add(-48 * time.Hour)}
	cost := core.Claim{Field: f, Actor: core.Actor{Name: "cost"}, Value: val(2), Intent: core.IntentCost, At: at.Add(-3 * time.Hour), Expires: at.Add(-time.Hour)}
	v := core.Verdict{Field: f, Decision: core.DecisionYield, Winner: &hpa, Losers: []core.Claim{git, cost}, Rule: "owner.replicas"}
	block := report.Timeline(v, at)
	code := strings.TrimSuffix(strings.TrimPrefix(block, "\n```mermaid\n"), "```\n")
	if code == block {
		t.Fatalf("not a Mermaid block:\n%s", block)
	}

	page := filepath.Join(t.TempDir(), "mermaid.html")
	html := `<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"><script src="file://` +
		filepath.Join(dir, "dist", "mermaid.min.js") + `"></script></head><body><div id="out"></div></body></html>`
	if err := os.WriteFile(page, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	alloc, stopAlloc := chromedp.NewExecAllocator(ctx, chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("allow-file-access-from-files", true))
	defer stopAlloc()
	browser, stopBrowser := chromedp.NewContext(alloc)
	defer stopBrowser()
	if err := chromedp.Do(browser); err != nil {
		t.Fatal(err)
	}
	type drawn struct {
		Tasks, Milestones int
		Error             string
	}
	var got drawn
	p := visit(t, browser, "file://"+page, func(ctx context.Context) (err error) {
		script := `(async () => {
			try {
				mermaid.initialize({startOnLoad: false});
				const {svg} = await mermaid.render("timeline", ` + jsString(code) + `);
				document.getElementById("out").innerHTML = svg;
				return {Tasks: document.querySelectorAll("#out rect.task").length,
					Milestones: document.querySelectorAll("#out .milestone").length, Error: ""};
			} catch (e) { return {Tasks: 0, Milestones: 0, Error: String(e && e.message || e)}; }
		})()`
		got, err = chromedp.Run(ctx, chromedp.Evaluate[drawn](script, chromedp.EvalAwaitPromise))
		return err
	})
	if got.Error != "" {
		t.Fatalf("Mermaid refused the timeline: %s\n%s", got.Error, code)
	}
	// A bar per claim (the winner and two losers) and the verdict's milestone, which Mermaid draws
	// as a task too.
	if got.Tasks != 4 || got.Milestones != 1 {
		t.Errorf("drawn %+v; want 4 tasks (3 claims and the milestone), 1 milestone\n%s", got, code)
	}
	if len(p.errors) > 0 {
		t.Errorf("errors while drawing:\n%s", strings.Join(p.errors, "\n"))
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
