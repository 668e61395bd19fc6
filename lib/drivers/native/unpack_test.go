package native

import (
	"archive/tar"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unpackBytes writes archive to a file and unpacks it into a fresh directory
// inside a fresh parent, which it returns with the result.
func unpackBytes(t *testing.T, archive []byte, own *owner, limit int64) (parent, dest string, st unpackStats, err error) {
	t.Helper()
	parent = t.TempDir()
	src := filepath.Join(t.TempDir(), "image")
	require.NoError(t, os.WriteFile(src, archive, 0o600))
	dest = filepath.Join(parent, "dest")
	require.NoError(t, os.Mkdir(dest, 0o700))
	st, err = unpack(t.Context(), src, dest, own, limit)
	return parent, dest, st, err
}

var sampleEntries = []tarEntry{
	{Name: "./", Type: tar.TypeDir, Mode: 0o755},
	{Name: "./bin/", Type: tar.TypeDir},
	{Name: "./bin/run.sh", Body: "#!/bin/sh\necho hi\n", Mode: 0o755},
	{Name: "./etc/motd", Body: "hello\n"},
	{Name: "./etc/motd.link", Type: tar.TypeSymlink, Linkname: "motd"},
	{Name: "./lib/motd.hard", Type: tar.TypeLink, Linkname: "./etc/motd"},
	{Name: "./setuid", Body: "x", Mode: 0o4755},
	{Name: "./ro/", Type: tar.TypeDir, Mode: 0o555},
	{Name: "./ro/file", Body: "in a read-only dir", Mode: 0o444},
	{Name: "./dev/null", Type: tar.TypeChar},
	{Name: "./fifo", Type: tar.TypeFifo},
	{Name: "./etc/motd", Body: "hello again\n"}, // a later entry wins
	{Name: "./up/../etc/inside", Body: "cleaned"},
}

func TestUnpackFormats(t *testing.T) {
	plain := makeTar(t, sampleEntries...)
	for _, format := range []string{"tar", "gzip", "xz", "zstd"} {
		t.Run(format, func(t *testing.T) {
			_, dest, st, err := unpackBytes(t, compress(t, format, plain), nil, 0)
			require.NoError(t, err)
			assert.Equal(t, format, st.Format)
			assert.Equal(t, 2, st.Skipped, "the device and the fifo are skipped")

			read := func(p string) string {
				b, err := os.ReadFile(filepath.Join(dest, p))
				require.NoError(t, err)
				return string(b)
			}
			assert.Equal(t, "#!/bin/sh\necho hi\n", read("bin/run.sh"))
			assert.Equal(t, "hello again\n", read("etc/motd"))
			assert.Equal(t, "hello again\n", read("etc/motd.link"))
			assert.Equal(t, "cleaned", read("etc/inside"))
			assert.Equal(t, "in a read-only dir", read("ro/file"))
			assert.Equal(t, "hello\n", read("lib/motd.hard"), "the hard link kept the first file")

			mode := func(p string) os.FileMode {
				fi, err := os.Lstat(filepath.Join(dest, p))
				require.NoError(t, err)
				return fi.Mode()
			}
			assert.Equal(t, os.FileMode(0o755), mode("bin/run.sh").Perm())
			assert.Equal(t, os.FileMode(0o755), mode("setuid"), "setuid is dropped")
			assert.Equal(t, os.ModeDir|0o755, mode("ro"), "the owner can always enter and clean up")
			assert.Equal(t, os.ModeDir|0o755, mode("."))
			assert.Equal(t, os.ModeSymlink, mode("etc/motd.link").Type())
			target, err := os.Readlink(filepath.Join(dest, "etc/motd.link"))
			require.NoError(t, err)
			assert.Equal(t, "motd", target)
			assert.NoFileExists(t, filepath.Join(dest, "dev/null"))
			assert.NoFileExists(t, filepath.Join(dest, "fifo"))
			fi, err := os.Stat(filepath.Join(dest, "bin/run.sh"))
			require.NoError(t, err)
			assert.Equal(t, 2024, fi.ModTime().Year(), "file times come from the archive")
		})
	}
}

func TestUnpackRefusesEscapes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		want    string
	}{
		{"dot-dot", []tarEntry{{Name: "../evil", Body: "x"}}, `entry "../evil" escapes the image directory`},
		{"dot-dot deeper", []tarEntry{{Name: "a/b/../../../evil", Body: "x"}}, "escapes the image directory"},
		{"absolute", []tarEntry{{Name: "/tmp/evil", Body: "x"}}, `entry "/tmp/evil" has an absolute path`},
		{"dot-dot dir", []tarEntry{{Name: "../d/", Type: tar.TypeDir}}, "escapes"},
		{"absolute symlink", []tarEntry{{Name: "etc", Type: tar.TypeSymlink, Linkname: "/etc"}},
			`symlink "etc" points to the absolute path "/etc"`},
		{"symlink up", []tarEntry{{Name: "up", Type: tar.TypeSymlink, Linkname: "../.."}},
			`symlink "up" points outside the image directory ("../..")`},
		{"nested symlink up", []tarEntry{{Name: "a/", Type: tar.TypeDir}, {Name: "a/l", Type: tar.TypeSymlink, Linkname: "../../x"}},
			"points outside the image directory"},
		{"write through a symlink", []tarEntry{{Name: "sub/", Type: tar.TypeDir}, {Name: "l", Type: tar.TypeSymlink, Linkname: "sub"},
			{Name: "l/file", Body: "x"}}, `entry "l/file" goes through the symlink "l"`},
		{"symlink chain", []tarEntry{{Name: "d/", Type: tar.TypeDir}, {Name: "d/s", Type: tar.TypeSymlink, Linkname: ".."},
			{Name: "d/s/l", Type: tar.TypeSymlink, Linkname: "../escape"}}, `goes through the symlink "d/s"`},
		{"hard link outside", []tarEntry{{Name: "h", Type: tar.TypeLink, Linkname: "../../etc/passwd"}},
			`hard link "h" points outside the image directory`},
		{"hard link absolute", []tarEntry{{Name: "h", Type: tar.TypeLink, Linkname: "/etc/passwd"}},
			"points outside the image directory"},
		{"hard link to a symlink", []tarEntry{{Name: "s", Type: tar.TypeSymlink, Linkname: "x"}, {Name: "h", Type: tar.TypeLink, Linkname: "s"}},
			"must point to a file earlier in the archive"},
		{"hard link to nothing", []tarEntry{{Name: "h", Type: tar.TypeLink, Linkname: "missing"}},
			"must point to a file earlier in the archive"},
		{"empty", nil, "empty archive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent, dest, _, err := unpackBytes(t, makeTar(t, tc.entries...), nil, 0)
			require.ErrorIs(t, err, ErrBadImage)
			assert.Contains(t, err.Error(), tc.want)
			names, rerr := os.ReadDir(parent)
			require.NoError(t, rerr)
			require.Len(t, names, 1, "nothing is made next to the image directory")
			assert.Equal(t, "dest", names[0].Name())
			_ = dest
		})
	}
}

func TestUnpackOtherFailures(t *testing.T) {
	t.Run("not an archive", func(t *testing.T) {
		_, _, _, err := unpackBytes(t, []byte("this is not a tar file, it is a sentence that goes on for a while"), nil, 0)
		require.ErrorIs(t, err, ErrBadImage)
		assert.Contains(t, err.Error(), "not a tar archive (nor gzip, bzip2, xz or zstd compressed)")
	})
	t.Run("broken gzip", func(t *testing.T) {
		_, _, _, err := unpackBytes(t, []byte{0x1f, 0x8b, 0, 1, 2}, nil, 0)
		require.ErrorIs(t, err, ErrBadImage)
		assert.Contains(t, err.Error(), "gzip")
	})
	t.Run("truncated xz", func(t *testing.T) {
		full := compress(t, "xz", makeTar(t, sampleEntries...))
		_, _, _, err := unpackBytes(t, full[:len(full)/2], nil, 0)
		require.Error(t, err)
	})
	t.Run("over the size limit", func(t *testing.T) {
		big := make([]byte, 4096)
		_, _, _, err := unpackBytes(t, makeTar(t, tarEntry{Name: "a", Body: string(big)}, tarEntry{Name: "b", Body: string(big)}), nil, 6000)
		require.ErrorIs(t, err, ErrBadImage)
		assert.Contains(t, err.Error(), "unpacks to more than 6000 bytes")
	})
	t.Run("cancelled", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "image")
		require.NoError(t, os.WriteFile(src, makeTar(t, sampleEntries...), 0o600))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := unpack(ctx, src, t.TempDir(), nil, 0)
		require.ErrorIs(t, err, context.Canceled)
	})
}

func TestUnpackOwner(t *testing.T) {
	needRoot(t) // chown to another user
	_, dest, _, err := unpackBytes(t, makeTar(t, sampleEntries...), &owner{UID: 54321, GID: 54322}, 0)
	require.NoError(t, err)
	for _, p := range []string{".", "bin", "bin/run.sh", "etc/motd.link", "ro/file", "lib/motd.hard"} {
		fi, err := os.Lstat(filepath.Join(dest, p))
		require.NoError(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		assert.Equal(t, uint32(54321), st.Uid, p)
		assert.Equal(t, uint32(54322), st.Gid, p)
	}
}

func TestDetectFormat(t *testing.T) {
	for head, want := range map[string]string{
		"\x1f\x8b\x08":             "gzip",
		"\xfd7zXZ\x00\x00":         "xz",
		"\x28\xb5\x2f\xfd\x00":     "zstd",
		"BZh91AY&SY":               "bzip2",
		"bin/\x00\x00\x00\x00\x00": "tar",
		"":                         "tar",
	} {
		assert.Equal(t, want, detectFormat([]byte(head)), "%q", head)
	}
}
