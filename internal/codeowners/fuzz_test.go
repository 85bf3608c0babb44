package codeowners

import "testing"

// FuzzCodeowners: a CODEOWNERS file is written by anyone who can push to the repository; whatever
// it holds, parsing and matching return an answer or an error, never a panic.
func FuzzCodeowners(f *testing.F) {
	f.Add([]byte("* @acme/platform\n/infra/kafka/ @acme/data-platform dana@example.com\n"), "infra/kafka/main.tf")
	f.Add([]byte("# comment\n\n**/*.yaml @a @b\n/docs/ \n"), "docs/x.yaml")
	f.Add([]byte("[Section] @x\n\\#escaped @y\n"), "#escaped")
	f.Fuzz(func(t *testing.T, data []byte, path string) {
		file, err := Parse("CODEOWNERS", data)
		if err != nil {
			return
		}
		_, _ = file.Owners(path)
	})
}
