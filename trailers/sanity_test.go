package trailers

import "testing"

// TestOracleIsAlive guards the differential tests against an oracle that answers nothing.
func TestOracleIsAlive(t *testing.T) {
	got, err := gitParse(t, "S\n\nIntent: availability\nSigned-off-by: A <a@b>\n", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "Intent: availability\nSigned-off-by: A <a@b>\n"; got != want {
		t.Fatalf("git answered %q, want %q", got, want)
	}
	got, err = gitAdd(t, "Subject\n", []string{"Intent=cost"}, WriteOptions{})
	if err != nil || got != "Subject\n\nIntent: cost\n" {
		t.Fatalf("git answered %q, %v", got, err)
	}
}
