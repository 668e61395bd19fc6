// Package buildinfo says which build of hf is running: what the release build
// stamped at link time (-ldflags "-X main.version=... -X main.revision=...")
// and what the Go toolchain recorded in the binary (VCS revision and time, Go
// version). The toolchain records no VCS information in some checkouts (a git
// worktree, -buildvcs=false), which is why the release build stamps the
// revision too.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Info describes one build.
type Info struct {
	// Version is the release version: the stamped one, else the module
	// version of a `go install ...@vX`, else "dev".
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from ("" when the
	// build had no VCS information).
	Revision string `json:"revision,omitempty"`
	// Time is the commit time (RFC 3339), "" when unknown.
	Time string `json:"time,omitempty"`
	// Modified is true when the work tree had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Stamp is what the release build set at link time; empty fields were not.
type Stamp struct {
	Version  string // "dev" counts as not set
	Revision string
	Time     string
}

// Read returns the running binary's build information: the stamp, and the
// toolchain's record where the stamp is silent.
func Read(stamp Stamp) Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(stamp, bi)
}

func fromBuildInfo(stamp Stamp, bi *debug.BuildInfo) Info {
	info := fromVCS(stamp.Version, bi)
	if stamp.Revision != "" {
		info.Revision = stamp.Revision
	}
	if stamp.Time != "" {
		info.Time = stamp.Time
	}
	return info
}

func fromVCS(stamped string, bi *debug.BuildInfo) Info {
	info := Info{Version: stamped, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		if info.Version == "" {
			info.Version = "dev"
		}
		return info
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	if info.Version == "" || info.Version == "dev" {
		info.Version = "dev"
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
		}
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
	return info
}

// String is the build on a few lines, for a version command.
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "version:  %s\n", i.Version)
	rev := i.Revision
	if rev == "" {
		rev = "unknown"
	}
	if i.Modified {
		rev += " (modified)"
	}
	fmt.Fprintf(&b, "revision: %s\n", rev)
	if i.Time != "" {
		fmt.Fprintf(&b, "time:     %s\n", i.Time)
	}
	fmt.Fprintf(&b, "go:       %s\n", i.GoVersion)
	fmt.Fprintf(&b, "platform: %s\n", i.Platform)
	return b.String()
}

// Collector is the hf_build_info gauge: always 1, with the build in its
// labels, so a dashboard can tell which nodes run which build.
func (i Info) Collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "hf_build_info",
		Help:        "The build of this hf-node: always 1, labelled with its version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": i.Revision, "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}
