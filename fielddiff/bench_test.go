package fielddiff

import (
	"strings"
	"testing"
)

func BenchmarkParseDeployment(b *testing.B) {
	doc := []byte(strings.Split(deployment, "---\n")[0])
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Parse("k8s/web.yaml", doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseTF(b *testing.B) {
	src := []byte(asg)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Parse("infra/kafka/main.tf", src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDiffSnapshots(b *testing.B) {
	x, _ := Parse("k8s/web.yaml", []byte(deployment))
	y, _ := Parse("k8s/web.yaml", []byte(strings.Replace(deployment, "replicas: 3 #", "replicas: 5 #", 1)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		DiffSnapshots(x, y)
	}
}
