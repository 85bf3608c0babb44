package fielddiff

import (
	"reflect"
	"strings"
	"sync"
	"testing"
)

// mapCache is the simplest DocCache: it keeps everything and counts what it was asked.
type mapCache struct {
	mu        sync.Mutex
	docs      map[DocKey]*Document
	hits, add int
}

func (c *mapCache) Document(k DocKey) (*Document, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.docs[k]
	if ok {
		c.hits++
	}
	return d, ok
}

func (c *mapCache) AddDocument(k DocKey, d *Document) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.docs == nil {
		c.docs = map[DocKey]*Document{}
	}
	c.docs[k] = d
	c.add++
}

// checkParseCached holds ParseCached to Parse's result, errors included, with an empty cache and
// again with the documents cached.
func checkParseCached(t *testing.T, path string, content []byte, cache *mapCache) {
	t.Helper()
	want, wantErr := Parse(path, content)
	for _, pass := range []string{"cold", "cached"} {
		got, err := ParseCached(path, content, cache)
		if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("%s: ParseCached error %v, Parse error %v", pass, err, wantErr)
		}
		if err != nil {
			continue
		}
		if !reflect.DeepEqual(got.leaves, want.leaves) {
			t.Fatalf("%s: ParseCached read %d fields, Parse %d:\n%v\n%v", pass, got.Len(), want.Len(), got.Fields(), want.Fields())
		}
	}
}

func TestParseCachedMatchesParse(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: n}\ndata: {x: '1'}\n"
	for name, src := range map[string]string{
		"one document":         deployment,
		"install.yaml":         deployment + "---\n" + configMap + "---\n" + prometheusRule,
		"leading comment":      "# generated\n---\n" + deployment + "---\n" + configMap,
		"CRLF":                 strings.ReplaceAll(deployment+"---\n"+configMap, "\n", "\r\n"),
		"BOM":                  "\ufeff" + deployment + "---\n" + configMap,
		"marker with content":  deployment + "--- # next\n" + configMap + "--- !!map\n" + cm,
		"not a marker":         "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  x: |\n    ----\n    ---x\n" + "---\n" + configMap,
		"document end":         deployment + "...\n---\n" + configMap,
		"anchors per document": "apiVersion: v1\nkind: ConfigMap\nmetadata: &m {name: a}\ndata: &d {x: '1'}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\nstringData: {<<: *d}\n",
		"duplicate object":     cm + "---\n" + cm,
		"directive":            "%YAML 1.1\n---\n" + cm + "---\n" + configMap,
		"template":             cm + "---\n{{ if .Values.x }}\n" + configMap + "{{ end }}\n",
		"empty documents":      "---\n---\n" + cm + "---\n",
		"list":                 "apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Secret, metadata: {name: s}}]\n---\n" + cm,
		"quoted across marker": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {x: \"a\n---\nb\"}\n---\n" + configMap,
	} {
		t.Run(name, func(t *testing.T) { checkParseCached(t, "k8s/install.yaml", []byte(src), &mapCache{}) })
	}
}

// TestFilesWithoutObjectsAreNotParsed: a file that cannot define an object is not read, so its
// syntax errors are no problem of the ledger's; UTF-16 (found in Argo CD's test data) is read.
func TestFilesWithoutObjectsAreNotParsed(t *testing.T) {
	if s, err := Parse("ui/tsconfig.json", []byte(`{"compilerOptions": {"target": "es5",}}`)); err != nil || s.Len() != 0 {
		t.Errorf("a JSON file without objects: %v, %d fields; want no error and no fields", err, s.Len())
	}
	if _, err := Parse("chart/templates/x.yaml", []byte("replicas: {{ .Values.replicas }}\n")); err == nil {
		t.Error("a template without kind must still be reported as a template")
	}
	var utf16 []byte
	for _, r := range "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: linkerd\n  annotations:\n    linkerd.io/inject: disabled\n" {
		utf16 = append(utf16, byte(r), 0)
	}
	s, err := Parse("testdata/utf-16.yaml", append([]byte{0xFF, 0xFE}, utf16...))
	if err != nil || s.Len() != 1 {
		t.Fatalf("UTF-16 manifest: %v, %d fields; want its annotation", err, s.Len())
	}
}

// TestParseCachedReadsOnlyChangedDocuments is the point of ParseCached: the second version of a
// three-document file parses one document.
func TestParseCachedReadsOnlyChangedDocuments(t *testing.T) {
	cache := &mapCache{}
	v1 := deployment + "---\n" + configMap + "---\n" + prometheusRule
	v2 := deployment + "---\n" + strings.Replace(configMap, "\n", "\n# changed\n", 1) + "---\n" + prometheusRule
	if _, err := ParseCached("k8s/install.yaml", []byte(v1), cache); err != nil {
		t.Fatal(err)
	}
	n := len(splitDocuments([]byte(v1)))
	if n < 3 || cache.add != n || cache.hits != 0 {
		t.Fatalf("first version: %d documents parsed, %d from the cache; want %d and 0", cache.add, cache.hits, n)
	}
	if _, err := ParseCached("k8s/install.yaml", []byte(v2), cache); err != nil {
		t.Fatal(err)
	}
	if cache.add != n+1 || cache.hits != n-1 {
		t.Errorf("second version: %d documents parsed in all, %d from the cache; want %d and %d", cache.add, cache.hits, n+1, n-1)
	}
	// The same documents in another file are the same documents: the CRDs of install.yaml and
	// ha/install.yaml are read once.
	if _, err := ParseCached("other/install.yaml", []byte(v1), cache); err != nil {
		t.Fatal(err)
	}
	if cache.add != n+1 {
		t.Errorf("another file: %d documents parsed in all, want %d", cache.add, n+1)
	}
	// ...except a Kustomization, which a missing name makes its directory's.
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [a.yaml]\n---\n" + configMap
	a, err := ParseCached("a/kustomization.yaml", []byte(k), cache)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseCached("b/kustomization.yaml", []byte(k), cache)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a.Fields(), b.Fields()) {
		t.Errorf("the Kustomizations of two directories read as the same object: %v", a.Fields())
	}
}

func FuzzParseCached(f *testing.F) {
	f.Add([]byte(deployment+"---\n"+configMap), []byte(configMap))
	f.Add([]byte("a: &x 1\n---\nb: *x\n"), []byte("--- |\n---\n"))
	f.Add([]byte("%YAML 1.1\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"), []byte("---\r\n{{ x }}\r\n"))
	f.Add([]byte("\xff\xfek\x00i\x00n\x00d\x00:\x00 \x00v\x00\n\x00"), []byte("kin: d\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		// What mayHoldObjects lets Parse skip holds no object indeed.
		for _, in := range [][]byte{a, b} {
			if y, err := parseYAMLObjects("k8s/x.yaml", in); !mayHoldObjects(in) && err == nil && len(y.objects) > 0 {
				t.Fatalf("mayHoldObjects skips %q, which defines %v", in, y.objects)
			}
		}
		cache := &mapCache{}
		checkParseCached(t, "k8s/x.yaml", a, cache)
		checkParseCached(t, "k8s/x.yaml", b, cache)
		joined := append(append(append([]byte{}, a...), "\n---\n"...), b...)
		checkParseCached(t, "k8s/x.yaml", joined, cache)
	})
}
