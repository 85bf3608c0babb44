package trailers

import "testing"

func BenchmarkParse(b *testing.B) {
	entries := corpus(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, e := range entries {
			Parse(e.msg, Options{})
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(entries)), "ns/msg")
}

// BenchmarkParseTypical is a 5-trailer commit message such as the ledger reads 100,000 of.
func BenchmarkParseTypical(b *testing.B) {
	msg := "Scale web for INC-4211\n\nOn-call hotfix during the incident.\n\nIntent: availability\n" +
		"Motivation: incident INC-4211 severity=high\nExpires: 4h\nParley-PR: 42\nSigned-off-by: On Call <oncall@example.com>\n"
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Parse(msg, Options{})
	}
}

// BenchmarkGitParse runs the git binary on the same corpus, per message, for comparison.
func BenchmarkGitParse(b *testing.B) {
	var entries []corpusEntry
	for _, e := range corpus(b) {
		if !hangs(e.msg, Options{}) { // git 2.39.5 never returns on these
			entries = append(entries, e)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, e := range entries {
			if _, err := gitParse(b, e.msg, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(entries)), "ns/msg")
}
