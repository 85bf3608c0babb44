package yamlvalue

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// decodeAll reads every document of content with yaml.v3's own decoder into an any.
func decodeAll(content []byte) ([]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(content))
	var out []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
}

func convertAll(content []byte) ([]any, error) {
	dec := NewDecoder(content)
	var out []any
	for {
		v, err := dec.Decode()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
}

var seeds = []string{
	"a: 1\nb: [x, 2.5, true, null, ~]\nc: {d: e}\n",
	"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  k1: v\n  k2: v\n",
	"1: a\n2.5: b\ntrue: c\nnull: d\n",
	"a: 1\na: 2\n",
	"1: a\n'1': b\n",
	"0x1: a\n1: b\n",
	"t: 2001-12-14t21:59:43.10-05:00\nd: 2002-12-14\n",
	"b: !!binary aGVsbG8=\nbad: !!binary '%%%'\n",
	"big: 18446744073709551615\nneg: -9223372036854775808\nf: .inf\nn: .nan\no: 0o17\n",
	"x: &a {k: v}\ny: *a\nz: [*a, *a]\n",
	"a: &a [*a]\n",
	"? [a, b]\n: c\n",
	"? {a: 1}\n: c\n",
	"base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n",
	"d:\n  <<: [{a: 1}, {a: 2, b: 3}]\n",
	"'<<': 1\n",
	"!!str 5: a\n!!int 6: b\n",
	"a: !!int x\n",
	"--- a\n--- b\n---\n",
	"a: [1, 2\n",
	"a: &x 1\nb: *y\n",
	"k: &k v\n*k : w\n",
	"a: !custom {b: c}\n? !!str [a]\n: b\n",
	"a: b\n---\na: b\na: c\n",
	"l0: &l0 [x, x, x, x, x, x, x, x, x]\nl1: &l1 [*l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0, *l0]\nl2: &l2 [*l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1, *l1]\nl3: [*l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2, *l2]\n",
}

// FuzzNodeValuesMatchYAMLv3 holds the package to its contract: for any input, the values are
// those yaml.v3's decoder sets into an any, or both refuse the input. The one difference allowed
// is the alias budget: yaml.v3 measures aliasing by a ratio, this package by a count.
func FuzzNodeValuesMatchYAMLv3(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		if len(content) > 4096 {
			return
		}
		// This package first: it bounds alias expansion to about a hundred thousand nodes, so
		// yaml.v3 (whose bound is millions) is asked only about inputs that are cheap to decode.
		got, gerr := convertAll(content)
		if aliasing(gerr) {
			return
		}
		want, werr := decodeAll(content)
		if aliasing(werr) {
			return
		}
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("yaml.v3 error %v, yamlvalue error %v\ninput %q", werr, gerr, content)
		}
		if werr != nil {
			return // both refuse; yaml.v3 returns the documents before the broken one, and so do we
		}
		if w, g := fmt.Sprintf("%#v", want), fmt.Sprintf("%#v", got); w != g {
			t.Fatalf("values differ\nyaml.v3   %s\nyamlvalue %s\ninput %q", w, g, content)
		}
	})
}

func aliasing(err error) bool {
	return err != nil && strings.Contains(err.Error(), "excessive aliasing")
}

func TestDuplicateKeyNamesItsLine(t *testing.T) {
	_, err := Unmarshal([]byte("a: 1\nb: 2\na: 3\n"))
	if err == nil || !strings.Contains(err.Error(), `line 3: mapping key "a" already defined at line 1`) {
		t.Fatalf("err = %v", err)
	}
}

func TestSelfContainingAnchorRefused(t *testing.T) {
	if _, err := Unmarshal([]byte("a: &a [*a]\n")); err == nil || !strings.Contains(err.Error(), "contains itself") {
		t.Fatalf("err = %v", err)
	}
}

// nineLevelsOfAliases is head, then nine levels of nine aliases each of the level below: 9⁹ nodes
// in about 200 bytes.
func nineLevelsOfAliases(head string) string {
	var b strings.Builder
	b.WriteString(head + "l0: &l0 [x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [", i, i)
		for j := 0; j < 9; j++ {
			fmt.Fprintf(&b, "*l%d, ", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}

// TestAliasExpansionBounded: nine levels of nine aliases each name 9⁹ (387 million) nodes in 200
// bytes; the count of nodes the aliases expand to is refused past ExpansionBudget.
func TestAliasExpansionBounded(t *testing.T) {
	_, err := Unmarshal([]byte(nineLevelsOfAliases("")))
	if err == nil || !strings.Contains(err.Error(), "excessive aliasing") {
		t.Fatalf("err = %v", err)
	}
}

// TestMergeDocumentAliasesBounded: a document with a merge key is left to yaml.v3, which would
// expand nine levels of nine aliases up to its own ratio; the expansion is counted first.
func TestMergeDocumentAliasesBounded(t *testing.T) {
	_, err := Unmarshal([]byte(nineLevelsOfAliases("m: {<<: {a: 1}}\n")))
	if err == nil || !strings.Contains(err.Error(), "excessive aliasing: more than") {
		t.Fatalf("err = %v", err)
	}
}

func TestMergeKeysAsYAMLv3(t *testing.T) {
	in := "base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n"
	got, err := Unmarshal([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var want any
	if err := yaml.Unmarshal([]byte(in), &want); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
	// A document with a merge key is decoded by yaml.v3, so its mappings are held to its budget.
	var big strings.Builder
	big.WriteString("base: &b {x: 1}\nd:\n  <<: *b\n")
	for i := 0; i <= MaxMergeDocumentKeys; i++ {
		fmt.Fprintf(&big, "  k%d: v\n", i)
	}
	_, err = Unmarshal([]byte(big.String()))
	var ke *KeysError
	if !errors.As(err, &ke) || ke.Keys != MaxMergeDocumentKeys+2 || ke.Line != 3 {
		t.Fatalf("err = %v", err)
	}
}

// flatMap is one mapping of n one-line keys, the shape that costs yaml.v3 n²/2 comparisons.
func flatMap(n int) []byte {
	var b bytes.Buffer
	b.WriteString("data:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  k%d: v\n", i)
	}
	return b.Bytes()
}

// TestLinearInKeys counts work, not time: the allocations of a mapping of 80,000 keys are at most
// a little over four times those of 20,000 (a Go map grows by doubling, hence the slack).
func TestLinearInKeys(t *testing.T) {
	small, large := flatMap(20_000), flatMap(80_000)
	a := testing.AllocsPerRun(1, func() { _, _ = Unmarshal(small) })
	b := testing.AllocsPerRun(1, func() { _, _ = Unmarshal(large) })
	if b > 4.5*a {
		t.Fatalf("20,000 keys: %.0f allocations; 80,000 keys: %.0f, more than 4.5 times", a, b)
	}
}

func TestCheckKeys(t *testing.T) {
	var n yaml.Node
	if err := yaml.Unmarshal(flatMap(11), &n); err != nil {
		t.Fatal(err)
	}
	err := CheckKeys(&n, 10)
	var ke *KeysError
	if !errors.As(err, &ke) || ke.Keys != 11 || ke.Line != 2 {
		t.Fatalf("err = %v", err)
	}
	if err := CheckKeys(&n, 11); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkUnmarshalKeys(b *testing.B) {
	for _, n := range []int{10_000, 40_000, 90_000} {
		content := flatMap(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Unmarshal(content); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
