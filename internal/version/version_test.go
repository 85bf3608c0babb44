package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// A binary built with -buildvcs=true inside a checkout carries these settings (as `go version -m`
// prints them); ParseBuildInfo reads the same text the runtime embeds.
const stamped = "path\tgithub.com/parleyhq/parley/cmd/parley\n" +
	"mod\tgithub.com/parleyhq/parley\tv0.1.1-0.20261126101500-0123456789ab\t\n" +
	"build\t-trimpath=true\n" +
	"build\tvcs=git\n" +
	"build\tvcs.revision=0123456789abcdef0123456789abcdef01234567\n" +
	"build\tvcs.time=2026-11-26T10:15:00Z\n" +
	"build\tvcs.modified=true\n"

func parse(t *testing.T, s string) *debug.BuildInfo {
	t.Helper()
	bi, err := debug.ParseBuildInfo(s)
	if err != nil {
		t.Fatal(err)
	}
	return bi
}

func TestFromBuildInfoReadsTheVCSStamp(t *testing.T) {
	got := fromBuildInfo(parse(t, stamped), "", "", "", "")
	want := Info{Version: "v0.1.1-0.20261126101500-0123456789ab", Revision: "0123456789abcdef0123456789abcdef01234567",
		Time: "2026-11-26T10:15:00Z", Modified: true, GoVersion: runtime.Version()}
	if got != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if s := got.String(); s != "parley v0.1.1-0.20261126101500-0123456789ab (commit 0123456789ab-dirty, 2026-11-26T10:15:00Z, "+runtime.Version()+")" {
		t.Fatalf("String() = %q", s)
	}
}

func TestLinkerValuesWinOverTheStamp(t *testing.T) {
	got := fromBuildInfo(parse(t, stamped), "0.2.0", "fedcba9876543210fedcba9876543210fedcba98", "2026-12-01T00:00:00Z", "false")
	if got.Version != "0.2.0" || got.Revision != "fedcba9876543210fedcba9876543210fedcba98" || got.Time != "2026-12-01T00:00:00Z" {
		t.Fatalf("linker values ignored: %+v", got)
	}
	if got.GoVersion != runtime.Version() || got.Modified {
		t.Fatalf("go version lost or modified not overridden: %+v", got)
	}
}

func TestUnstampedBuildSaysSo(t *testing.T) {
	// go build -buildvcs=false, or go test: no VCS settings, Main.Version "(devel)".
	got := fromBuildInfo(parse(t, "path\tgithub.com/parleyhq/parley/cmd/parley\nmod\tgithub.com/parleyhq/parley\t(devel)\t\n"), "", "", "", "")
	if got.Version != "(devel)" || got.Revision != "" || got.ShortRevision() != "unknown" {
		t.Fatalf("got %+v", got)
	}
	if !strings.Contains(got.String(), "commit unknown") {
		t.Fatalf("String() = %q", got.String())
	}
	if none := fromBuildInfo(nil, "", "", "", ""); none.Version != "(devel)" {
		t.Fatalf("no build info: %+v", none)
	}
}
