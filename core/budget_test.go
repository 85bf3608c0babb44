package core

import "testing"

func TestBudgetSaysWhatIsOver(t *testing.T) {
	b := Budget{FieldsPerFile: 5}.WithDefaults()
	if b.FileBytes != 8<<20 || b.FieldsPerFile != 5 || b.FieldsPerChange != 50_000 || b.ValueBytes != 64<<10 {
		t.Errorf("defaults: %+v", b)
	}
	for _, c := range []struct {
		got, want string
	}{
		{b.FileTooLarge("k8s/prod/big.yaml", 19_900_000), "k8s/prod/big.yaml: 19.9 MB, above the 8 MiB Parley reads; not judged"},
		{b.TooManyFields("k8s/prod/many.yaml", 6), "k8s/prod/many.yaml: 6 changed fields, above the 5 Parley judges in one file; not judged"},
		{Size(64 << 10), "64 KiB"}, {Size(1500), "1.5 kB"}, {Size(100), "100 bytes"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
