package review

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyhq/parley/core"
	"github.com/parleyhq/parley/core/fielddiff"
	"github.com/parleyhq/parley/internal/gittest"
)

// deepTF is Terraform nested n blocks deep: past fielddiff.MaxHCLNesting it is refused after
// lexing the whole file (issue 34's deeptf attack, smaller).
func deepTF(n int) string {
	return strings.Repeat("b {\n", n) + strings.Repeat("}\n", n)
}

// memoBranch is main (web.yaml, main.tf, a policy making replicas immutable) and a branch pr
// adding the deep Terraform file twice (one blob, two paths), a YAML file with one unreadable
// document, and a change of web's replicas (a veto).
func memoBranch(t *testing.T) *gittest.Runner {
	t.Helper()
	r := gittest.Init(t, time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC), time.Hour).As("Dana", "dana@parley.example")
	r.Write("k8s/prod/web.yaml", webOnly)
	r.Write("infra/app/main.tf", "resource \"aws_instance\" \"web\" {\n  instance_type = \"t3.small\"\n}\n")
	r.Write(".parley/policy.hcl", immutablePolicy)
	r.Commit("Baseline\n")
	r.Run("checkout", "-q", "-b", "pr")
	r.Write("infra/app/deep.tf", deepTF(fielddiff.MaxHCLNesting+500))
	r.Write("infra/copy/deep.tf", deepTF(fielddiff.MaxHCLNesting+500))
	r.Write("k8s/prod/deep.yaml", webOnly+"---\n"+deepDocument())
	r.Write("k8s/prod/web.yaml", strings.Replace(webOnly, "replicas: 3", "replicas: 5", 1))
	r.Write("infra/app/main.tf", "resource \"aws_instance\" \"web\" {\n  instance_type = \"t3.large\"\n}\n")
	r.Commit("Nest\n")
	return r
}

// judgeWith evaluates branch pr of r's repository with memo, counting the files read whole.
func judgeWith(t *testing.T, r *gittest.Runner, memo *Parsed, b core.Budget) (Result, []string) {
	t.Helper()
	res, read, _, err := newJudgement(t, r, memo, b)()
	if err != nil {
		t.Fatal(err)
	}
	return res, read
}

// newJudgement opens branch pr of r's repository for a judgement with memo, run later (on any
// goroutine): the result, the files read whole, and how many times the head's whole tree was read
// for the dependency graph.
func newJudgement(t *testing.T, r *gittest.Runner, memo *Parsed, b core.Budget) func() (Result, []string, int, error) {
	t.Helper()
	gs, err := OpenGitSource(r.Dir, "main", "pr")
	if err != nil {
		t.Fatal(err)
	}
	src := &reads{GitSource: gs}
	led, pol := mainLedgerAndPolicy(t, r.Dir, gs)
	now := time.Date(2026, 11, 20, 10, 5, 0, 0, time.UTC)
	pr := PullRequest{Number: 9, BaseSHA: gs.BaseSHA(), HeadSHA: gs.HeadSHA(), Updated: now,
		Author: core.Identity{Source: core.SourceGitHubUser, ID: "mallory"}, Parsed: memo, Budget: b}
	return func() (Result, []string, int, error) {
		src.read = nil
		res, err := Evaluate(context.Background(), pr, src, pol, led, nil, now)
		slices.Sort(src.read)
		return res, src.read, gs.treeReads, err
	}
}

// Issue 34: judging the same pull request again reads and lexes none of the blobs it parsed
// before. A Terraform file refused for its nesting is refused again from memory, a file that read
// is diffed from its remembered snapshot, the head's dependency graph (which lexed every .tf of
// the head, the refused one too) is the one built before, and the judgement is the same, field for field and
// problem for problem, as the first one and as one without memory.
func TestSecondJudgementReadsNoBlobParsedBefore(t *testing.T) {
	r := memoBranch(t)
	memo := &Parsed{}
	first, firstReads, trees, err := newJudgement(t, r, memo, core.Budget{})()
	if err != nil || trees != 1 {
		t.Fatalf("first judgement: %v, %d reads of the head's tree for its dependency graph, want 1", err, trees)
	}
	want := []string{"infra/app/deep.tf", "infra/app/main.tf", "infra/app/main.tf", "infra/copy/deep.tf",
		"k8s/prod/deep.yaml", "k8s/prod/web.yaml", "k8s/prod/web.yaml"}
	if !reflect.DeepEqual(firstReads, want) {
		t.Fatalf("first judgement read %q, want %q", firstReads, want)
	}
	for _, p := range []string{"infra/app/deep.tf", "infra/copy/deep.tf"} {
		if !slices.ContainsFunc(first.Problems, func(s string) bool { return strings.HasPrefix(s, p+": not judged: ") && strings.Contains(s, "nest") }) {
			t.Errorf("problems %q: want %s refused for its nesting", first.Problems, p)
		}
	}

	second, secondReads, trees, err := newJudgement(t, r, memo, core.Budget{})()
	if err != nil || trees != 0 {
		t.Errorf("second judgement: %v, %d reads of the head's tree, want its graph from memory", err, trees)
	}
	// The YAML file with an unreadable document is read again, both sides, to judge its readable
	// documents (its whole-file parse is remembered); nothing else is read.
	if want := []string{"k8s/prod/deep.yaml"}; !reflect.DeepEqual(secondReads, want) {
		t.Errorf("second judgement read %q, want only %q", secondReads, want)
	}
	if !reflect.DeepEqual(first, second) {
		t.Errorf("the remembered judgement differs:\nfirst  %+v\nsecond %+v", first, second)
	}
	none, _ := judgeWith(t, r, nil, core.Budget{})
	if !reflect.DeepEqual(none, second) {
		t.Errorf("the remembered judgement differs from one without memory:\nnone   %+v\nsecond %+v", none, second)
	}
	if c := second.Conclusion(); c != "failure" {
		t.Errorf("conclusion %s, want failure (the replicas veto)", c)
	}
}

// A new blob at the same path is read and judged afresh, and the budget of the judgement asking
// applies to a remembered blob as to a read one.
func TestMemoIsKeyedByContentNotPath(t *testing.T) {
	r := memoBranch(t)
	memo := &Parsed{}
	judgeWith(t, r, memo, core.Budget{})

	// The same path, another blob: nested deeper, so its refusal differs too.
	r.Write("infra/app/deep.tf", deepTF(fielddiff.MaxHCLNesting+900))
	r.Commit("Nest deeper\n")
	res, reads := judgeWith(t, r, memo, core.Budget{})
	if !slices.Contains(reads, "infra/app/deep.tf") || slices.Contains(reads, "infra/copy/deep.tf") {
		t.Errorf("read %q: want the changed infra/app/deep.tf read again, and infra/copy/deep.tf not", reads)
	}
	none, _ := judgeWith(t, r, nil, core.Budget{})
	if !reflect.DeepEqual(res, none) {
		t.Errorf("judged with memory %q\nwithout %q", res.Problems, none.Problems)
	}

	// A budget smaller than the remembered blob: too large, as without memory, and not read.
	small := core.Budget{FileBytes: 4 << 10}
	res, reads = judgeWith(t, r, memo, small)
	none, _ = judgeWith(t, r, nil, small)
	if !reflect.DeepEqual(res, none) {
		t.Errorf("small budget, judged with memory %q\nwithout %q", res.Problems, none.Problems)
	}
	if !slices.ContainsFunc(res.Problems, func(s string) bool {
		return strings.HasPrefix(s, "infra/copy/deep.tf: ") && strings.Contains(s, "above the 4 KiB")
	}) {
		t.Errorf("problems %q: want infra/copy/deep.tf too large for the 4 KiB budget", res.Problems)
	}
	if slices.Contains(reads, "infra/copy/deep.tf") {
		t.Errorf("read %q: a remembered blob over the budget needs no read", reads)
	}
}

// failing is a source whose reads of one path fail: a transient error, never remembered.
type failing struct {
	*GitSource
	path string
	err  error
}

func (f *failing) Content(ctx context.Context, sha, path string) ([]byte, bool, error) {
	if path == f.path {
		return nil, false, f.err
	}
	return f.GitSource.Content(ctx, sha, path)
}

// A read that fails is the judgement's error, and leaves nothing in memory: the next judgement
// reads the blob and refuses it for what it is.
func TestFailedReadIsNotRemembered(t *testing.T) {
	r := memoBranch(t)
	gs, err := OpenGitSource(r.Dir, "main", "pr")
	if err != nil {
		t.Fatal(err)
	}
	led, pol := mainLedgerAndPolicy(t, r.Dir, gs)
	memo := &Parsed{}
	now := time.Date(2026, 11, 20, 10, 5, 0, 0, time.UTC)
	pr := PullRequest{Number: 9, BaseSHA: gs.BaseSHA(), HeadSHA: gs.HeadSHA(), Updated: now, Parsed: memo}
	cut := errors.New("connection reset")
	if _, err := Evaluate(context.Background(), pr, &failing{GitSource: gs, path: "infra/app/deep.tf", err: cut}, pol, led, nil, now); !errors.Is(err, cut) {
		t.Fatalf("Evaluate: %v, want the read's error", err)
	}
	id, _, err := gs.BlobID(context.Background(), gs.HeadSHA(), "infra/app/deep.tf")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := memo.get("infra/app/deep.tf", id); ok {
		t.Fatal("a blob whose read failed is remembered")
	}
	res, reads := judgeWith(t, r, memo, core.Budget{})
	if !slices.Contains(reads, "infra/app/deep.tf") || !slices.ContainsFunc(res.Problems, func(s string) bool { return strings.HasPrefix(s, "infra/app/deep.tf: not judged: ") }) {
		t.Errorf("read %q, problems %q: want infra/app/deep.tf read and refused", reads, res.Problems)
	}
}

// Parsed keeps at most its entries and bytes, dropping the least recently used.
func TestParsedIsBounded(t *testing.T) {
	m := &Parsed{MaxEntries: 2, MaxBytes: 1 << 20}
	refusal := errors.New("refused")
	m.put("a.tf", "1", 10, nil, refusal)
	m.put("b.tf", "2", 10, nil, refusal)
	if _, ok := m.get("a.tf", "1"); !ok { // a is now the most recently used
		t.Fatal("a.tf dropped too early")
	}
	m.put("c.tf", "3", 10, nil, refusal)
	if _, ok := m.get("b.tf", "2"); ok {
		t.Error("b.tf, the least recently used, should have been dropped")
	}
	if e, ok := m.get("a.tf", "1"); !ok || e.refusal != "refused" {
		t.Errorf("a.tf: %+v, %v", e, ok)
	}
	if s := m.Stats(); s.Entries != 2 {
		t.Errorf("stats %+v, want 2 entries", s)
	}

	small := &Parsed{MaxEntries: 100, MaxBytes: 8 * (parsedOverhead + 100)}
	for i := range 50 {
		small.put("x.tf", fmt.Sprint(i), 10, nil, errors.New(strings.Repeat("e", 50)))
	}
	if s := small.Stats(); s.Bytes > small.MaxBytes || s.Entries == 0 {
		t.Errorf("stats %+v: want at most %d bytes and something kept", s, small.MaxBytes)
	}
	// One entry above an eighth of the bytes is not kept: it would push out everything else.
	small.put("huge.tf", "h", 10, nil, errors.New(strings.Repeat("e", small.MaxBytes)))
	if _, ok := small.get("huge.tf", "h"); ok {
		t.Error("an entry above an eighth of the budget was kept")
	}
}

// Judgements share one Parsed at once (go test -race checks the locking): each gets the answer a
// judgement alone gets.
func TestParsedSharedByConcurrentJudgements(t *testing.T) {
	r := memoBranch(t)
	alone, _ := judgeWith(t, r, nil, core.Budget{})
	memo := &Parsed{MaxEntries: 3} // fewer than the files: entries come and go while others read
	var wg sync.WaitGroup
	results, errs := make([]Result, 4), make([]error, 4)
	for i := range results {
		judge := newJudgement(t, r, memo, core.Budget{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				if results[i], _, _, errs[i] = judge(); errs[i] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, res := range results {
		if !reflect.DeepEqual(res, alone) {
			t.Errorf("judgement %d differs from one alone:\n%+v\n%+v", i, res, alone)
		}
	}
	if s := memo.Stats(); s.Entries > 3 || s.Hits == 0 {
		t.Errorf("stats %+v: want at most 3 entries, and hits", s)
	}
}
