package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	for _, tc := range []struct {
		name  string
		stamp Stamp
		bi    *debug.BuildInfo
		want  Info
	}{
		{"stamped with vcs", Stamp{Version: "v1.2.3"}, vcs, Info{Version: "v1.2.3", Revision: "abc123", Time: "2026-01-02T03:04:05Z", Modified: true, GoVersion: "go1.99"}},
		{"unstamped local build", Stamp{}, vcs, Info{Version: "dev", Revision: "abc123", Time: "2026-01-02T03:04:05Z", Modified: true, GoVersion: "go1.99"}},
		{"go install at a version", Stamp{Version: "dev"}, &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v0.4.0"}}, Info{Version: "v0.4.0", GoVersion: "go1.99"}},
		{"no build info", Stamp{}, nil, Info{Version: "dev"}},
		{"stamped revision without vcs (a worktree)", Stamp{Version: "v2", Revision: "def456", Time: "2026-02-03T00:00:00Z"},
			&debug.BuildInfo{GoVersion: "go1.99"}, Info{Version: "v2", Revision: "def456", Time: "2026-02-03T00:00:00Z", GoVersion: "go1.99"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fromBuildInfo(tc.stamp, tc.bi)
			assert.NotEmpty(t, got.Platform)
			if tc.want.GoVersion == "" {
				assert.NotEmpty(t, got.GoVersion, "the running toolchain's")
				tc.want.GoVersion = got.GoVersion
			}
			tc.want.Platform = got.Platform
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestString(t *testing.T) {
	s := Info{Version: "v1", Revision: "abc", Modified: true, GoVersion: "go1.99", Platform: "linux/amd64"}.String()
	assert.Contains(t, s, "version:  v1\n")
	assert.Contains(t, s, "revision: abc (modified)\n")
	assert.NotContains(t, s, "time:")
	assert.Contains(t, Info{Version: "dev"}.String(), "revision: unknown\n")
}

func TestCollector(t *testing.T) {
	c := Info{Version: "v1", Revision: "abc", GoVersion: "go1.99"}.Collector()
	want := `# HELP hf_build_info The build of this hf-node: always 1, labelled with its version, VCS revision and Go version.
# TYPE hf_build_info gauge
hf_build_info{goversion="go1.99",revision="abc",version="v1"} 1
`
	assert.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want)))
}
