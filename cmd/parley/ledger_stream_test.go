package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/demo"
	"github.com/parleyhq/parley/trailers/ledger"
)

// TestLedgerJSONIsOneDocument holds the streamed --json output to the bytes encoding/json gives the
// whole ledgerReport: the stream is an implementation detail, not a second format.
func TestLedgerJSONIsOneDocument(t *testing.T) {
	res, err := demo.Build(filepath.Join(t.TempDir(), "demo"))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"ledger", "--repo", res.Dir, "--json"},
		// No field matches: an empty array, as the encoder writes it.
		{"ledger", "--repo", res.Dir, "--json", "--field", "tf:nowhere//nothing.at_all"},
	} {
		code, out, stderr := runIn(t, "", args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var rep ledgerReport
		dec := json.NewDecoder(bytes.NewReader([]byte(out)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rep); err != nil {
			t.Fatalf("%v: not one JSON document: %v\n%s", args, err, out)
		}
		if dec.More() {
			t.Fatalf("%v: more than one JSON document", args)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			t.Fatal(err)
		}
		if out != want.String() {
			t.Errorf("%v: streamed output differs from the encoded report\n got: %.600s\nwant: %.600s", args, out, want.String())
		}
		if len(args) == 4 && (len(rep.Fields) < 40 || len(rep.Problems) == 0) {
			t.Errorf("the demo ledger should have its fields and its problem: %d fields, %d problems", len(rep.Fields), len(rep.Problems))
		}
		if len(args) == 6 && (rep.Fields == nil || len(rep.Fields) != 0) {
			t.Errorf("--field matching nothing: fields %v, want []", rep.Fields)
		}
	}
}

// TestProgressLine: a terminal sees one line redrawn (throttled, always the last state); anything
// else sees nothing.
func TestProgressLine(t *testing.T) {
	var quiet bytes.Buffer
	newProgressLine(&quiet, false).update(ledger.Progress{Branch: "refs/heads/main", Done: 1, Total: 2})
	if quiet.Len() != 0 {
		t.Errorf("progress written to a non-terminal: %q", quiet.String())
	}
	var tty bytes.Buffer
	p := newProgressLine(&tty, true)
	for i := 1; i <= 1000; i++ {
		p.update(ledger.Progress{Branch: "refs/heads/main", Done: i, Total: 1000})
	}
	out := tty.String()
	if n := strings.Count(out, "\r"); n < 2 || n > 10 {
		t.Errorf("1000 updates drew the line %d times, want a few", n)
	}
	if !strings.HasSuffix(out, "\r\033[Kparley: indexing main: 1000 of 1000 commits (100%)") {
		t.Errorf("the last state is not shown: %q", out)
	}
}

// TestInterruptedLedgerExits130: a stopped command says it was interrupted and exits as a shell
// expects of SIGINT, not as a failure.
func TestInterruptedLedgerExits130(t *testing.T) {
	res, err := demo.Build(filepath.Join(t.TempDir(), "demo"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"ledger", "--repo", res.Dir}, strings.NewReader(""), &out, &errb)
	if code != exitInterrupted || !strings.Contains(errb.String(), "interrupted") {
		t.Errorf("exit %d, stderr %q; want %d and a word that it was interrupted", code, errb.String(), exitInterrupted)
	}
}
