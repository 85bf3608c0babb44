// Package codeowners answers who owns a file of a repository by GitHub's CODEOWNERS rules: the
// file is the first found of .github/CODEOWNERS, CODEOWNERS and docs/CODEOWNERS, and the last
// line whose pattern matches a path names its owners. Parsing and matching are
// github.com/hmarr/codeowners's; this package finds the file among a revision's files and says
// what it found in words a verdict can quote.
package codeowners

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	co "github.com/hmarr/codeowners"
)

// Locations are where GitHub looks for a CODEOWNERS file, in its order: the first found is used.
var Locations = []string{".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS"}

// File is a parsed CODEOWNERS file.
type File struct {
	Path  string // where it was found
	rules co.Ruleset
}

// Find parses the first CODEOWNERS file at GitHub's locations among files (repository-relative
// slash paths). It returns nil without error when there is none.
func Find(files map[string][]byte) (*File, error) {
	for _, p := range Locations {
		if b, ok := files[p]; ok {
			return Parse(p, b)
		}
	}
	return nil, nil
}

// Parse parses a CODEOWNERS file's content; path names it in errors.
func Parse(path string, data []byte) (*File, error) {
	rules, err := co.ParseFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &File{Path: path, rules: rules}, nil
}

// Answer is who owns a path, and by which line.
type Answer struct {
	Owners  []string // @user, @org/team or an email address; empty when the line names nobody
	Line    int      // the matching line's number; 0 when no line matches
	Pattern string   // the matching line's pattern
}

// Owners answers who owns path (repository-relative, slash-separated): the owners on the last line
// whose pattern matches it.
func (f *File) Owners(path string) (Answer, error) {
	for i := len(f.rules) - 1; i >= 0; i-- {
		r := &f.rules[i]
		ok, err := match(r, path)
		if err != nil {
			return Answer{}, fmt.Errorf("%s: line %d (%s): %w", f.Path, r.LineNumber, r.RawPattern(), err)
		}
		if !ok {
			continue
		}
		a := Answer{Line: r.LineNumber, Pattern: r.RawPattern()}
		for _, o := range r.Owners {
			a.Owners = append(a.Owners, o.String())
		}
		return a, nil
	}
	return Answer{}, nil
}

// match is r.Match, which panics on some patterns a push can put in the file (a lone "/", found
// by FuzzCodeowners): such a pattern is an error naming its line, never a crash.
func match(r *co.Rule, path string) (ok bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			ok, err = false, fmt.Errorf("the pattern cannot be matched: %v", p)
		}
	}()
	return r.Match(path)
}

// Ask answers who is asked about a change to the file at path (the file that defines a field), in
// the words a verdict quotes: the owners and the line that names them, or, with no owners, why
// there are none. file and findErr are what Find returned; path "" means no file is known to
// define the field.
func Ask(file *File, findErr error, path string) (ask []string, from string) {
	switch {
	case findErr != nil:
		return nil, "the CODEOWNERS file could not be read (" + findErr.Error() + ")"
	case path == "":
		return nil, "no file in the repository is known to define the field, so no CODEOWNERS line applies"
	case file == nil:
		return nil, "the repository has no CODEOWNERS file (" + strings.Join(Locations, ", ") + ")"
	}
	a, err := file.Owners(path)
	switch {
	case err != nil:
		return nil, "the CODEOWNERS file could not be read (" + err.Error() + ")"
	case a.Line == 0:
		return nil, fmt.Sprintf("no line of %s covers %s, the file that defines the field", file.Path, path)
	case len(a.Owners) == 0:
		return nil, fmt.Sprintf("line %d of %s (%s) covers %s, the file that defines the field, but names no owner", a.Line, file.Path, a.Pattern, path)
	}
	return a.Owners, fmt.Sprintf("line %d of %s (%s) covers %s, the file that defines the field", a.Line, file.Path, a.Pattern, path)
}

// FindInDir is Find over the files at GitHub's locations under dir on disk (a scenario's
// directory, a work tree).
func FindInDir(dir string) (*File, error) {
	files := map[string][]byte{}
	for _, p := range Locations {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		files[p] = b
	}
	return Find(files)
}
