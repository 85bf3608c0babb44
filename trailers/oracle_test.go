package trailers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// The oracle is the machine's git binary, run with a clean configuration outside any repository.
// Git 2.39.5 is the reference version; its only divergences from current git on inputs ending in a
// newline are the hang covered by hangs below.

var oracleDir struct {
	once sync.Once
	dir  string
	err  error
}

func gitEnvDir(t testing.TB) string {
	oracleDir.once.Do(func() {
		if _, err := exec.LookPath("git"); err != nil {
			oracleDir.err = fmt.Errorf("the git binary is required for the differential tests: %w", err)
			return
		}
		oracleDir.dir, oracleDir.err = os.MkdirTemp("", "parley-trailers-oracle-")
	})
	if oracleDir.err != nil {
		t.Fatal(oracleDir.err)
	}
	return oracleDir.dir
}

// gitArgs turns options into git's configuration flags.
func gitArgs(o Options) []string {
	var args []string
	if o.CommentChar != 0 {
		args = append(args, "-c", "core.commentChar="+string(o.CommentChar))
	}
	if o.Separators != "" {
		args = append(args, "-c", "trailer.separators="+o.Separators)
	}
	for _, k := range o.Keys {
		args = append(args, "-c", "trailer."+k+".key="+k)
	}
	return args
}

func runGit(t testing.TB, stdin string, args ...string) (string, error) {
	dir := gitEnvDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir,
		"GIT_CEILING_DIRECTORIES="+filepath.Dir(dir), "LC_ALL=C")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func gitParse(t testing.TB, msg string, o Options) (string, error) {
	args := append(gitArgs(o), "interpret-trailers", "--parse")
	if o.NoDivider {
		args = append(args, "--no-divider")
	}
	return runGit(t, msg, args...)
}

func gitAdd(t testing.TB, msg string, add []string, o WriteOptions) (string, error) {
	args := append(gitArgs(o.Options), "interpret-trailers")
	if o.NoDivider {
		args = append(args, "--no-divider")
	}
	args = append(args, "--if-exists", []string{"addIfDifferentNeighbor", "addIfDifferent", "add", "replace", "doNothing"}[o.IfExists])
	args = append(args, "--if-missing", []string{"add", "doNothing"}[o.IfMissing])
	for _, a := range add {
		args = append(args, "--trailer", a)
	}
	return runGit(t, msg, args...)
}

var dividerLine = regexp.MustCompile(`(?m)^---[ \t\r\n]`)

// hangs reports whether git 2.39.5 loops forever on msg: a "---" divider before a scissors line.
func hangs(msg string, o Options) bool {
	if o.NoDivider {
		return false
	}
	c := string(o.comment())
	if strings.HasPrefix(msg, c+scissors) {
		return false
	}
	sc := strings.Index(msg, "\n"+c+scissors)
	loc := dividerLine.FindStringIndex(msg)
	return sc >= 0 && loc != nil && loc[0] <= sc
}

type corpusEntry struct{ name, msg string }

func corpus(t testing.TB) []corpusEntry {
	paths, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.txt"))
	if err != nil || len(paths) < 200 {
		t.Fatalf("corpus: %d files, err %v (want at least 200)", len(paths), err)
	}
	sort.Strings(paths)
	var out []corpusEntry
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, corpusEntry{filepath.Base(p), string(b)})
	}
	return out
}

var optionSets = []struct {
	name string
	o    Options
}{
	{"default", Options{}},
	{"no-divider", Options{NoDivider: true}},
	{"comment-semicolon", Options{CommentChar: ';'}},
	{"separators-percent", Options{Separators: "%"}},
	{"separators-colon-equals-hash", Options{Separators: ":=#"}},
	{"configured-keys", Options{Keys: []string{"Acked-by", "Intent", "Bug"}}},
}

// parallel runs fn over n items on a few goroutines (each call spawns git; the machine has 2 cores).
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

// hangExpectations are hand-written outputs for inputs on which git 2.39.5 hangs, following current
// git (the earlier cut, the divider, wins).
var hangExpectations = map[string]string{
	"divider-then-scissors": "Key: v\n",
}

func TestParseMatchesGit(t *testing.T) {
	entries := corpus(t)
	type job struct {
		e  corpusEntry
		os int
	}
	var jobs []job
	for _, e := range entries {
		for i := range optionSets {
			jobs = append(jobs, job{e, i})
		}
	}
	var mu sync.Mutex
	var failures []string
	compared := 0
	parallel(len(jobs), func(i int) {
		j := jobs[i]
		o := optionSets[j.os].o
		got := FormatWith(Parse(j.e.msg, o), o)
		var want string
		if hangs(j.e.msg, o) {
			name := strings.TrimSuffix(j.e.name[strings.IndexByte(j.e.name, '-')+1:], ".txt")
			w, ok := hangExpectations[name]
			if !ok || optionSets[j.os].name != "default" {
				return // only the default options have a hand-written expectation
			}
			want = w
		} else {
			var err error
			if want, err = gitParse(t, j.e.msg, o); err != nil {
				mu.Lock()
				failures = append(failures, err.Error())
				mu.Unlock()
				return
			}
		}
		mu.Lock()
		defer mu.Unlock()
		compared++
		if got != want {
			failures = append(failures, fmt.Sprintf("%s [%s]:\ninput %q\n got %q\nwant %q", j.e.name, optionSets[j.os].name, j.e.msg, got, want))
		}
	})
	sort.Strings(failures)
	for _, f := range failures {
		t.Error(f)
	}
	if compared < len(entries)*len(optionSets)-len(optionSets) {
		t.Errorf("compared only %d of %d cases", compared, len(jobs))
	}
	t.Logf("compared %d messages × option sets with git", compared)
}

var addSets = [][]string{
	{"Intent=availability"},
	{"Key=v", "Key=v"},
	{"Signed-off-by: A <a@b>"},
	{"key=V", "Other = w"},
	{"Motivation=incident INC-4211 severity=high", "Expires: 4h"},
	{"acked=x"},
	{"Bare"},
}

func TestAddMatchesGit(t *testing.T) {
	entries := corpus(t)
	type job struct {
		e    corpusEntry
		add  []string
		opts WriteOptions
	}
	var jobs []job
	for i, e := range entries {
		if hangs(e.msg, Options{}) {
			continue
		}
		jobs = append(jobs, job{e, addSets[i%len(addSets)], WriteOptions{}})
		jobs = append(jobs, job{e, addSets[(i+3)%len(addSets)], WriteOptions{IfExists: IfExists((i / len(addSets)) % 5)}})
		if i%4 == 0 {
			jobs = append(jobs, job{e, addSets[(i+1)%len(addSets)], WriteOptions{IfMissing: IfMissingDoNothing, IfExists: Replace}})
		}
		if i%5 == 0 {
			o := optionSets[1+i/5%(len(optionSets)-1)].o
			if !hangs(e.msg, o) {
				jobs = append(jobs, job{e, addSets[i%len(addSets)], WriteOptions{Options: o, IfExists: AddIfDifferent}})
			}
		}
	}
	var mu sync.Mutex
	var failures []string
	parallel(len(jobs), func(i int) {
		j := jobs[i]
		var add []Trailer
		for _, a := range j.add {
			tr, err := ParseTrailerArg(a, j.opts.Options)
			if err != nil {
				t.Errorf("ParseTrailerArg(%q): %v", a, err)
				return
			}
			add = append(add, tr)
		}
		got := Add(j.e.msg, add, j.opts)
		want, err := gitAdd(t, j.e.msg, j.add, j.opts)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failures = append(failures, err.Error())
			return
		}
		if got != want {
			failures = append(failures, fmt.Sprintf("%s %q %+v:\ninput %q\n got %q\nwant %q", j.e.name, j.add, j.opts, j.e.msg, got, want))
		}
	})
	sort.Strings(failures)
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("compared %d additions with git", len(jobs))
}
