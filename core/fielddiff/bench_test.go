package fielddiff

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// checkoutDeployment is a typical 40-line Deployment, the unit the ledger parses most.
const checkoutDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: checkout
  namespace: shop
  labels:
    app.kubernetes.io/name: checkout
    app.kubernetes.io/part-of: shop
  annotations:
    argocd.argoproj.io/sync-wave: "2"
spec:
  replicas: 4
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      app.kubernetes.io/name: checkout
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 25%, maxUnavailable: 0}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: checkout
    spec:
      serviceAccountName: checkout
      terminationGracePeriodSeconds: 30
      containers:
        - name: checkout
          image: ghcr.io/acme/checkout:2.8.1
          args: ["--listen=:8080", "--log-format=json"]
          ports:
            - {name: http, containerPort: 8080}
          env:
            - {name: DB_POOL_SIZE, value: "20"}
          resources:
            requests: {cpu: 500m, memory: 512Mi}
            limits: {memory: 1Gi}
          readinessProbe:
            httpGet: {path: /healthz, port: http}
            periodSeconds: 5
`

func BenchmarkParseDeployment(b *testing.B) {
	src := []byte(checkoutDeployment)
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := Parse("apps/checkout/deployment.yaml", src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseTF(b *testing.B) {
	src := []byte(asg)
	b.ReportAllocs()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := Parse("infra/kafka/main.tf", src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDiffSnapshots(b *testing.B) {
	x, err := Parse("apps/checkout/deployment.yaml", []byte(checkoutDeployment))
	if err != nil {
		b.Fatal(err)
	}
	y, err := Parse("apps/checkout/deployment.yaml", []byte(strings.Replace(checkoutDeployment, "replicas: 4", "replicas: 6", 1)))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(DiffSnapshots(x, y)) != 1 {
			b.Fatal("want one change")
		}
	}
}

// BenchmarkReadYAML compares the fast reader with yaml.v3's path on real manifests (the fuzz seed
// corpus): a HelmRelease with anchors and block scalars, a CRD with wrapped descriptions, and JSON;
// the objects' leaves (fast, yamlv3) and the node trees alone (fast-tree, yamlv3-tree).
//
//	go test ./core/fielddiff -run '^$' -bench BenchmarkReadYAML -benchmem
func BenchmarkReadYAML(b *testing.B) {
	for _, name := range []string{"helmrelease-anchors", "crd-multiline-descriptions", "json-object-and-swagger"} {
		src := fuzzSeed(b, "FuzzFastReaderMatchesYAMLv3", name)
		if _, ok, _ := fastParseObjects("apps/x/manifest.yaml", src); !ok {
			b.Fatalf("%s: the fast reader declines it", name)
		}
		for _, reader := range []struct {
			name string
			read func(p string, content []byte) (*yamlParser, error)
		}{
			{"fast", func(p string, content []byte) (*yamlParser, error) {
				y, _, _ := fastParseObjects(p, content)
				return y, nil
			}},
			{"yamlv3", parseYAMLv3},
			// The trees alone, without the flattening both share:
			{"fast-tree", func(p string, content []byte) (*yamlParser, error) {
				fastDocuments(content)
				return nil, nil
			}},
			{"yamlv3-tree", func(p string, content []byte) (*yamlParser, error) {
				_, err := decodeV3(content)
				return nil, err
			}},
		} {
			b.Run(name+"/"+reader.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					if _, err := reader.read("apps/x/manifest.yaml", src); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// fuzzSeed reads an input of a committed seed corpus.
func fuzzSeed(tb testing.TB, target, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fuzz", target, name))
	if err != nil {
		tb.Fatal(err)
	}
	_, quoted, ok := strings.Cut(string(b), "[]byte(")
	if !ok {
		tb.Fatalf("%s: not a []byte seed", name)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimSpace(quoted), ")"))
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return []byte(s)
}
