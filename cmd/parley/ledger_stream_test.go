package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/parleyhq/parley/internal/demo"
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
