package review

import (
	"bytes"
	"strings"
	"testing"

	"github.com/parleyhq/parley/core/fielddiff"
)

// FuzzPartialDiff: however a file fails to read, reading it document by document never panics,
// always names what was not judged, and only judges fields a readable document of the head sets
// or the merge base's readable documents set; the documents it cuts are the file.
func FuzzPartialDiff(f *testing.F) {
	web := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: prod}\nspec:\n  replicas: 3\n"
	deep := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\ndata: " + strings.Repeat("{a: ", 101) + "x" + strings.Repeat("}", 101) + "\n"
	f.Add([]byte(web), []byte(strings.Replace(web, "3", "5", 1)+"---\n"+deep))
	f.Add([]byte(web+"---\n"+deep), []byte(web))
	f.Add([]byte(""), []byte("---\nkind: [\n---\n"+web))
	f.Add([]byte(web), []byte("%YAML 1.1\n---\n"+web+"---\nkind: [\n"))
	f.Fuzz(func(t *testing.T, old, new []byte) {
		if len(old)+len(new) > 1<<14 {
			return
		}
		for _, c := range [][]byte{old, new} {
			if docs, ok := splitDocuments(c); ok && !bytes.Equal(bytes.Join(docs, nil), c) {
				t.Fatalf("documents %q do not join to %q", docs, c)
			}
		}
		const p = "k8s/x.yaml"
		_, err := fielddiff.Diff(p, old, new)
		if err == nil {
			return
		}
		changes, problems := partialDiff(p, old, new, err)
		if len(problems) == 0 {
			t.Fatalf("%v: no problem named", err)
		}
		oldOK, _, _, _ := readableDocuments(p, old)
		newOK, _, _, _ := readableDocuments(p, new)
		a, _ := fielddiff.Parse(p, oldOK)
		b, _ := fielddiff.Parse(p, newOK)
		for _, c := range changes {
			_, inOld := a.Get(c.Field)
			_, inNew := b.Get(c.Field)
			if !inOld && !inNew {
				t.Fatalf("%s judged, but no readable document sets it", c.Field)
			}
		}
	})
}
