package docbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestFindReadsEachFormOfCommand(t *testing.T) {
	doc := strings.Join([]string{
		"Prose with `go test ./trailers -run '^$' -bench 'Parse' -benchtime 2000x -count 3` inline,",
		"and `go test -run='^$' -bench='Receiver/sync=full' ./webhooks` with the package last.",
		"| `go test -bench Update`: full | 262 ms |", // a table quoting a command: no package, skipped
		"The reader's `go test ./x -run TestOnly` runs no benchmark.",
		"```sh",
		"PARLEY_BENCH_REPO=/tmp/r nice go test ./trailers/ledger/ -run '^$' -bench HistoryRead -benchtime 2x",
		"go test ./core/fielddiff -run '^$' -bench .   # every one",
		"cd reconcile/driftstate && go test -c -o /tmp/ds.test . && /tmp/ds.test -test.run '^$' \\",
		"  -test.bench 'BenchmarkRecordReview$|RecordOnLongHistory' -test.benchtime 2000x",
		"```",
		"```sh",
		"go test -c -o /tmp/new.test ./webhooks/store    # and the same in an older checkout",
		"for r in 1 2; do for v in old new; do",
		"  /tmp/$v.test -test.run '^$' -test.bench BenchmarkSQLiteDeliveryPath -test.benchtime 500x",
		"done; done",
		"(cd $R && parley ledger --field 'k8s:none/None/x/y#/z' > /dev/null) && cp $R/parley/ledger.db /tmp/base.db",
		"(cd app && true)",
		"go test ./trailers/ledger -run '^$' -bench 'UpdateIncrementalReal$' -benchtime 20x",
		"cd app && go test -c -o /tmp/app.test .",
		"/tmp/app.test -test.run '^$' -test.bench 'AdmissionHTTP2/^inline$' -test.benchtime 6000x",
		"```",
	}, "\n")
	got, err := Find("doc.md", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []Ref{
		{"doc.md", 1, "./trailers", "Parse"},
		{"doc.md", 2, "./webhooks", "Receiver/sync=full"},
		{"doc.md", 6, "./trailers/ledger", "HistoryRead"},
		{"doc.md", 7, "./core/fielddiff", "."},
		{"doc.md", 8, "./reconcile/driftstate", "BenchmarkRecordReview$|RecordOnLongHistory"},
		{"doc.md", 14, "./webhooks/store", "BenchmarkSQLiteDeliveryPath"},
		{"doc.md", 18, "./trailers/ledger", "UpdateIncrementalReal$"},
		{"doc.md", 20, "./app", "AdmissionHTTP2/^inline$"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Find:\n got %v\nwant %v", got, want)
	}
}

func TestFindRefusesABinaryNothingBuilt(t *testing.T) {
	doc := "```sh\n/tmp/gone.test -test.run '^$' -test.bench Anything\n```\n"
	_, err := Find("doc.md", strings.NewReader(doc))
	if err == nil || !strings.Contains(err.Error(), "doc.md:2") || !strings.Contains(err.Error(), "/tmp/gone.test") {
		t.Fatalf("Find = %v, want an error naming doc.md:2 and the binary", err)
	}
}

// TestDocumentedBenchmarksRun runs every benchmark command of docs/ once (-benchtime 1x), each
// package's test binary built once and run in the package's directory as go test would. A command
// whose pattern matches no benchmark fails; one that skips (it needs a repository snapshot the
// document's command names in its environment) counts as found.
func TestDocumentedBenchmarksRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the test binaries of the packages docs/ benchmarks (minutes)")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var refs []Ref
	for _, d := range docs {
		f, err := os.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Find("docs/"+filepath.Base(d), f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, got...)
	}
	if len(refs) < 30 {
		t.Fatalf("found %d benchmark commands in docs/, want the 30 or more they give: is the reader broken?", len(refs))
	}
	bins := map[string]string{}
	binDir := t.TempDir()
	for _, r := range refs {
		if _, ok := bins[r.Package]; ok {
			continue
		}
		bin := filepath.Join(binDir, strings.NewReplacer("/", "_", ".", "_").Replace(r.Package)+".test")
		cmd := exec.Command("go", "test", "-c", "-o", bin, r.Package)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: go test -c %s: %v\n%s", r, r.Package, err, out)
		}
		bins[r.Package] = bin
	}

	// The check itself: a pattern that matches nothing must be told apart from one that ran.
	if n, _, err := runOnce(bins[refs[0].Package], refs[0].Dir(root), "^BenchmarkNoSuchBenchmarkAnywhere$"); err != nil || n != 0 {
		t.Fatalf("a pattern matching nothing: %d found, %v; want 0 and no error", n, err)
	}

	seen := map[Ref]bool{}
	ran := 0
	for _, r := range refs {
		key := Ref{Package: r.Package, Pattern: r.Pattern}
		if seen[key] {
			continue
		}
		seen[key] = true
		n, out, err := runOnce(bins[r.Package], r.Dir(root), r.Pattern)
		switch {
		case err != nil:
			t.Errorf("%s: %v\n%s", r, err, out)
		case n == 0:
			t.Errorf("%s: the pattern matches no benchmark of the package (renamed or moved?)", r)
		default:
			ran++
		}
	}
	t.Logf("%d benchmark commands in the %d documents of docs/, %d distinct; found and passing once: %d", len(refs), len(docs), len(seen), ran)
}

var (
	benchResult = regexp.MustCompile(`(?m)^Benchmark\S*\s+\d+\s`)
	benchSkip   = regexp.MustCompile(`(?m)^\s*--- SKIP: Benchmark`)
	benchFail   = regexp.MustCompile(`(?m)^\s*--- FAIL: `)
)

// runOnce runs the benchmarks of bin matching pattern once each in dir, and reports how many ran
// or skipped.
func runOnce(bin, dir, pattern string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run", "^$", "-test.bench", pattern, "-test.benchtime", "1x", "-test.count", "1", "-test.v")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err == nil && benchFail.Match(out) {
		err = fmt.Errorf("a benchmark failed")
	}
	if err != nil {
		return 0, tail(out), err
	}
	return len(benchResult.FindAll(out, -1)) + len(benchSkip.FindAll(out, -1)), "", nil
}

// tail is the end of a command's output, for a failure's message.
func tail(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
