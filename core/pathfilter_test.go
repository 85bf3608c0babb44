package core

import "testing"

func TestPathFilter(t *testing.T) {
	def := PathFilter{}
	for path, want := range map[string]bool{
		"k8s/prod/web.yaml":                           true,
		"manifests/install.yaml":                      true,
		"reposerver/repository/testdata/app/app.yaml": false,
		"testdata/x.yaml":                             false,
		"ui/node_modules/pkg/x.yaml":                  false,
		"vendor/k8s.io/api/x.yaml":                    false,
	} {
		if got := def.Match(path); got != want {
			t.Errorf("default filter, %s: %v, want %v", path, got, want)
		}
	}
	f := PathFilter{Include: []string{"clusters/**", "infra/*.tf"}, Exclude: []string{}}
	for path, want := range map[string]bool{
		"clusters/prod/apps/web.yaml": true,
		"clusters/testdata/x.yaml":    true, // an empty exclude list excludes nothing
		"infra/main.tf":               true,
		"infra/modules/a/main.tf":     false,
		"apps/web.yaml":               false,
	} {
		if got := f.Match(path); got != want {
			t.Errorf("%v, %s: %v, want %v", f, path, got, want)
		}
	}
	if (PathFilter{}).String() == f.String() {
		t.Error("two filters print the same")
	}
	for _, bad := range []string{"", "/abs/**", "a/[b", "{a,b"} {
		if ValidatePathPattern(bad) == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
	if err := ValidatePathPattern("clusters/{prod,staging}/**/*.yaml"); err != nil {
		t.Error(err)
	}
}
