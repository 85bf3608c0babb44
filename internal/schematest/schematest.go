// Package schematest validates Parley's JSON documents against the schemas it publishes under
// docs/schemas, for tests. It compiles the schema files from the repository itself, so a test fails
// when a command's output and its published schema drift apart, whichever of the two moved.
package schematest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// BaseURL is the $id prefix of every schema file: https://parley.dev/schemas/<file>.
const BaseURL = "https://parley.dev/schemas/"

var (
	once     sync.Once
	compiled map[string]*jsonschema.Schema
	loadErr  error
)

// Dir finds docs/schemas by walking up from the working directory (a test's package directory).
func Dir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		p := filepath.Join(d, "docs", "schemas")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no docs/schemas above %s", wd)
		}
	}
}

// Names lists the schema files, sorted.
func Names() ([]string, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	m, err := filepath.Glob(filepath.Join(dir, "*.schema.json"))
	if err != nil {
		return nil, err
	}
	out := make([]string, len(m))
	for i, p := range m {
		out[i] = filepath.Base(p)
	}
	return out, nil
}

// load compiles every schema file once. References between files resolve by $id among the files
// themselves: nothing is fetched.
func load() (map[string]*jsonschema.Schema, error) {
	once.Do(func() {
		dir, err := Dir()
		if err != nil {
			loadErr = err
			return
		}
		names, err := Names()
		if err != nil {
			loadErr = err
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		c.AssertFormat()
		c.UseLoader(refuseLoader{})
		for _, n := range names {
			f, err := os.Open(filepath.Join(dir, n))
			if err != nil {
				loadErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(f)
			f.Close()
			if err != nil {
				loadErr = fmt.Errorf("%s: %w", n, err)
				return
			}
			if id, _ := doc.(map[string]any)["$id"].(string); id != BaseURL+n {
				loadErr = fmt.Errorf("%s: $id is %q, want %q", n, id, BaseURL+n)
				return
			}
			if err := c.AddResource(BaseURL+n, doc); err != nil {
				loadErr = fmt.Errorf("%s: %w", n, err)
				return
			}
		}
		compiled = map[string]*jsonschema.Schema{}
		for _, n := range names {
			s, err := c.Compile(BaseURL + n)
			if err != nil {
				loadErr = fmt.Errorf("compile %s: %w", n, err)
				return
			}
			compiled[n] = s
		}
	})
	return compiled, loadErr
}

// refuseLoader makes a reference to anything but the schema files an error instead of a download.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema reference %s is not one of docs/schemas", url)
}

// Check validates one JSON document against the named schema file (e.g. "claim.schema.json").
func Check(name string, doc []byte) error {
	schemas, err := load()
	if err != nil {
		return err
	}
	s, ok := schemas[name]
	if !ok {
		return fmt.Errorf("no schema %s in docs/schemas", name)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("does not match %s: %w", name, err)
	}
	return nil
}

// Validate fails t unless doc matches the named schema.
func Validate(t testing.TB, name string, doc []byte) {
	t.Helper()
	if err := Check(name, doc); err != nil {
		t.Errorf("%v\ndocument:\n%s", err, clip(doc))
	}
}

// ValidateLines validates every line of a JSON Lines stream that is not blank or a # comment.
func ValidateLines(t testing.TB, name string, stream []byte) {
	t.Helper()
	for i, line := range strings.Split(string(stream), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := Check(name, []byte(line)); err != nil {
			t.Errorf("line %d: %v", i+1, err)
		}
	}
}

func clip(b []byte) string {
	if len(b) > 4000 {
		return string(b[:4000]) + "\n..."
	}
	return string(b)
}
