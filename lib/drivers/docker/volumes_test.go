package docker

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestVolumeOwners(t *testing.T) {
	for _, tc := range []struct {
		name, user string
		volumes    []string
		want       []string // "name uid:gid mode"
	}{
		{name: "no volumes", user: "65534:65534"},
		{name: "root owns what the engine makes", user: "0:0", volumes: []string{"/data"}},
		{name: "root by uid alone", user: "0", volumes: []string{"/data"}},
		{name: "uid and gid", user: "65534:65534", volumes: []string{"/data", "/srv/cache/"},
			want: []string{"data/ 65534:65534 755", "srv/cache/ 65534:65534 755"}},
		{name: "a bare uid gets group 0", user: "1000", volumes: []string{"/data"}, want: []string{"data/ 1000:0 755"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			archive, err := volumeOwners(tc.user, tc.volumes)
			require.NoError(t, err)
			if tc.want == nil {
				assert.Nil(t, archive)
				return
			}
			var got []string
			tr := tar.NewReader(bytes.NewReader(archive))
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				require.NoError(t, err)
				assert.Equal(t, byte(tar.TypeDir), h.Typeflag)
				got = append(got, fmt.Sprintf("%s %d:%d %o", h.Name, h.Uid, h.Gid, h.Mode))
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// A template's volumes are the container user's to write, whoever that is;
// the engine makes them as root when the image has no such directory.
func TestVolumesAreTheUsers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := f.driver(t, "node-a", "docker", map[string]any{"allow_root": true})
	for _, tc := range []struct {
		user, want string
	}{{"", "65534 65534"}, {"1000", "1000 0"}, {"0:0", "0 0"}} {
		t.Run("user="+tc.user, func(t *testing.T) {
			entry := map[string]any{"volumes": []string{"/data", "/srv/cache"}}
			if tc.user != "" {
				entry["user"] = tc.user
			}
			r, err := d.Allocate(t.Context(), f.template("vol", types.Resources{CPU: 0.1, RAMGB: 0.1}, entry), map[string]string{"HF_MACHINE": "v" + tc.user})
			require.NoError(t, err)
			deallocateLater(t, d, r)
			for _, dir := range []string{"/data", "/srv/cache"} {
				out := f.exec(t, r.ID, "sh", "-c", "echo hi > "+dir+"/f && cat "+dir+"/f && ls -ldn "+dir)
				assert.True(t, strings.HasPrefix(out, "hi\n"), "the container's user writes to %s: %q", dir, out)
				fields := strings.Fields(strings.TrimPrefix(out, "hi\n"))
				require.GreaterOrEqual(t, len(fields), 4, out)
				assert.Equal(t, "drwxr-xr-x", fields[0], dir)
				assert.Equal(t, tc.want, fields[2]+" "+fields[3], "owner of %s", dir)
			}
		})
	}
}
