// Package version says which build of Parley is running: its version, the commit it was built
// from, that commit's time and the Go release that compiled it. Everything comes from the
// binary's own build information (runtime/debug.ReadBuildInfo), which `go build` stamps inside a
// Git checkout with -buildvcs=true; release builds (scripts/image, scripts/release) also set the
// version with -ldflags "-X github.com/parleyhq/parley/internal/version.version=0.1.0", because a
// build from a checkout only knows a pseudo-version (and the commit, its time and whether the
// checkout was modified, which Go does not stamp everywhere; see below).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at link time by release builds (-ldflags -X); empty otherwise. A revision, time or modified
// flag set this way wins over the VCS stamp: Go stamps nothing in a git worktree or submodule
// (where .git is a file) nor outside a checkout (a source tarball), so scripts/ship passes what
// git says.
var (
	version   string
	revision  string
	buildTime string
	modified  string // "true" or "false"
)

// Info describes one build.
type Info struct {
	Version   string `json:"version"`            // 0.1.0, a module pseudo-version, or "(devel)"
	Revision  string `json:"revision,omitempty"` // the full commit hash
	Time      string `json:"time,omitempty"`     // the commit's time, RFC 3339 (reproducible, unlike the clock at build)
	Modified  bool   `json:"modified"`           // built from a checkout with uncommitted changes
	GoVersion string `json:"go_version"`
}

// Get reads the running binary's build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi, version, revision, buildTime, modified)
}

// fromBuildInfo is Get over given inputs, so tests can show each source and its precedence.
func fromBuildInfo(bi *debug.BuildInfo, ldVersion, ldRevision, ldTime, ldModified string) Info {
	// The toolchain that compiled this binary is the runtime's own version; the build information
	// carries the same string, but a parsed one (debug.ParseBuildInfo) may not.
	info := Info{Version: "(devel)", GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		if v := bi.Main.Version; v != "" {
			info.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.time":
				info.Time = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if ldVersion != "" {
		info.Version = ldVersion
	}
	if ldRevision != "" {
		info.Revision = ldRevision
	}
	if ldTime != "" {
		info.Time = ldTime
	}
	if ldModified != "" {
		info.Modified = ldModified == "true"
	}
	return info
}

// ShortRevision is the first 12 characters of the commit, with "-dirty" for a modified checkout.
func (i Info) ShortRevision() string {
	r := i.Revision
	if r == "" {
		return "unknown"
	}
	if len(r) > 12 {
		r = r[:12]
	}
	if i.Modified {
		r += "-dirty"
	}
	return r
}

// String is the one line `parley --version` prints and a bug report quotes.
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "parley %s (commit %s", i.Version, i.ShortRevision())
	if i.Time != "" {
		fmt.Fprintf(&b, ", %s", i.Time)
	}
	fmt.Fprintf(&b, ", %s)", i.GoVersion)
	return b.String()
}
