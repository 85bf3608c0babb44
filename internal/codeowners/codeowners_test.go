package codeowners

import (
	"errors"
	"strings"
	"testing"
)

func TestOwnersAreTheLastMatchingLineOfTheFirstFileFound(t *testing.T) {
	files := map[string][]byte{
		"CODEOWNERS": []byte("* @acme/nobody-reads-this\n"),
		".github/CODEOWNERS": []byte(`# default owners
*                    @acme/platform
/infra/              @acme/infra
/infra/kafka/        @acme/data-platform dana@example.com
/infra/kafka/README.md
`),
	}
	f, err := Find(files)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != ".github/CODEOWNERS" {
		t.Fatalf("found %s, want .github/CODEOWNERS (GitHub's first location)", f.Path)
	}
	for _, tt := range []struct {
		path, owners string
		line         int
	}{
		{"infra/kafka/main.tf", "@acme/data-platform dana@example.com", 4},
		{"infra/vpc/main.tf", "@acme/infra", 3},
		{"clusters/prod/apps.yaml", "@acme/platform", 2},
		{"infra/kafka/README.md", "", 5}, // a line without owners: nobody owns it
	} {
		a, err := f.Owners(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(a.Owners, " ") != tt.owners || a.Line != tt.line {
			t.Errorf("%s: owners %v on line %d, want %q on line %d", tt.path, a.Owners, a.Line, tt.owners, tt.line)
		}
	}
}

func TestFindWithoutAFileAndWithABadOne(t *testing.T) {
	if f, err := Find(map[string][]byte{"README.md": nil}); f != nil || err != nil {
		t.Fatalf("no CODEOWNERS: got %v, %v", f, err)
	}
	_, err := Find(map[string][]byte{"docs/CODEOWNERS": []byte("*.tf @acme/infra\n/infra not-an-owner!\n")})
	if err == nil || !strings.Contains(err.Error(), "docs/CODEOWNERS") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("a bad line: %v", err)
	}
	f, err := Find(map[string][]byte{"docs/CODEOWNERS": []byte("/only/this @a\n")})
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := f.Owners("infra/main.tf"); a.Line != 0 || a.Owners != nil {
		t.Fatalf("no line matches: %+v", a)
	}
}

// TestAPatternTheLibraryCannotMatchIsAnError: hmarr/codeowners panics matching a lone "/"; the
// answer is an error naming the line.
func TestAPatternTheLibraryCannotMatchIsAnError(t *testing.T) {
	f, err := Parse("CODEOWNERS", []byte("* @a\n/ @b\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Owners("0"); err == nil || !strings.Contains(err.Error(), "CODEOWNERS: line 2 (/)") {
		t.Fatalf("got %v", err)
	}
}

func TestAskSaysWhoAndWhyInWords(t *testing.T) {
	f, err := Parse(".github/CODEOWNERS", []byte("*.tf @acme/infra\n/docs/\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		file     *File
		findErr  error
		path     string
		ask, why string
	}{
		{f, nil, "infra/kafka/main.tf", "@acme/infra", "line 1 of .github/CODEOWNERS (*.tf) covers infra/kafka/main.tf, the file that defines the field"},
		{f, nil, "docs/a.tf", "", "line 2 of .github/CODEOWNERS (/docs/) covers docs/a.tf, the file that defines the field, but names no owner"},
		{f, nil, "clusters/prod/apps.yaml", "", "no line of .github/CODEOWNERS covers clusters/prod/apps.yaml"},
		{nil, nil, "a.tf", "", "the repository has no CODEOWNERS file"},
		{f, nil, "", "", "no file in the repository is known to define the field"},
		{nil, errors.New("CODEOWNERS: line 2: bad"), "a.tf", "", "the CODEOWNERS file could not be read (CODEOWNERS: line 2: bad)"},
	} {
		ask, why := Ask(tt.file, tt.findErr, tt.path)
		if strings.Join(ask, ",") != tt.ask || !strings.HasPrefix(why, tt.why) {
			t.Errorf("%s: %v, %q; want %q, %q", tt.path, ask, why, tt.ask, tt.why)
		}
	}
}
