package native

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// ErrBadImage is wrapped by the error of an image that cannot be unpacked
// safely: an entry that escapes its directory (../, an absolute path, a link
// pointing outside), an unknown format or one larger than the template allows.
var ErrBadImage = errors.New("bad image")

// owner is who unpacked files belong to; nil keeps the daemon's user.
type owner struct{ UID, GID int }

// unpackStats counts what an unpack did.
type unpackStats struct {
	Files, Dirs, Links, Skipped int
	Bytes                       int64
	Format                      string
}

// compression formats, detected by their magic bytes.
var magics = []struct {
	name  string
	magic []byte
}{
	{"gzip", []byte{0x1f, 0x8b}},
	{"xz", []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}},
	{"zstd", []byte{0x28, 0xb5, 0x2f, 0xfd}},
	{"bzip2", []byte("BZh")},
}

// detectFormat names the compression of an archive from its first bytes:
// "gzip", "xz", "zstd", "bzip2" or "tar".
func detectFormat(head []byte) string {
	for _, m := range magics {
		if bytes.HasPrefix(head, m.magic) {
			return m.name
		}
	}
	return "tar"
}

// decompress wraps r in the decompressor for format; close releases it.
func decompress(r io.Reader, format string) (io.Reader, func(), error) {
	switch format {
	case "gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() { _ = zr.Close() }, nil
	case "xz":
		zr, err := xz.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() {}, nil
	case "zstd":
		// One decoder, no goroutines of its own; window capped against
		// hostile input (zstd's own default cap, spelled out).
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(1<<30))
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	case "bzip2":
		return bzip2.NewReader(r), func() {}, nil
	}
	return r, func() {}, nil
}

// unpacker extracts one archive into one directory through an os.Root, so no
// operation can leave the directory even when the archive tries.
type unpacker struct {
	root  *os.Root
	owner *owner
	limit int64 // bytes of file content allowed; 0 = no limit
	stats unpackStats
	// symlinks and files are the archive paths made so far, to refuse entries
	// that go through a symlink and hard links to anything but a file.
	symlinks map[string]bool
	files    map[string]bool
	dirs     map[string]dirMeta
}

type dirMeta struct {
	mode  fs.FileMode
	mtime time.Time
}

// unpack extracts the archive at archivePath (tar, optionally compressed) into
// dest, an existing empty directory. Every entry must stay inside dest: an
// absolute name, a "../" name, a symlink whose target leaves dest, an entry
// through a symlink or a hard link to anything but an earlier file fails the
// whole unpack with ErrBadImage. Devices and fifos are skipped. With own set,
// everything made belongs to own. limit > 0 caps the bytes of file content.
// The caller removes dest on error.
func unpack(ctx context.Context, archivePath, dest string, own *owner, limit int64) (unpackStats, error) {
	f, err := os.Open(archivePath)
	if err != nil {
		return unpackStats{}, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	head, _ := br.Peek(8)
	format := detectFormat(head)
	r, closeFn, err := decompress(br, format)
	if err != nil {
		return unpackStats{}, fmt.Errorf("%w: %s header: %v", ErrBadImage, format, err)
	}
	defer closeFn()

	root, err := os.OpenRoot(dest)
	if err != nil {
		return unpackStats{}, err
	}
	defer root.Close()
	u := &unpacker{root: root, owner: own, limit: limit,
		symlinks: map[string]bool{}, files: map[string]bool{}, dirs: map[string]dirMeta{}}
	u.stats.Format = format
	if err := u.extract(ctx, tar.NewReader(r)); err != nil {
		return u.stats, err
	}
	if err := u.finish(); err != nil {
		return u.stats, err
	}
	return u.stats, nil
}

func (u *unpacker) extract(ctx context.Context, tr *tar.Reader) error {
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if n == 0 {
				return fmt.Errorf("%w: empty archive", ErrBadImage)
			}
			return nil
		}
		if err != nil {
			if n == 0 {
				return fmt.Errorf("%w: not a tar archive (nor gzip, bzip2, xz or zstd compressed): %v", ErrBadImage, err)
			}
			return fmt.Errorf("%w: %s archive: %v", ErrBadImage, u.stats.Format, err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return err
		}
	}
}

// cleanName turns an archive path into a path relative to the image root, or
// fails when it is absolute or leaves the root.
func cleanName(name string) (string, error) {
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: entry %q has an absolute path", ErrBadImage, name)
	}
	c := path.Clean(name)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("%w: entry %q escapes the image directory", ErrBadImage, name)
	}
	return c, nil
}

// throughSymlink returns the first parent of name that is a symlink the
// archive made, or "".
func (u *unpacker) throughSymlink(name string) string {
	for dir := path.Dir(name); dir != "." && dir != "/"; dir = path.Dir(dir) {
		if u.symlinks[dir] {
			return dir
		}
	}
	return ""
}

func (u *unpacker) entry(hdr *tar.Header, body io.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if link := u.throughSymlink(name); link != "" {
		return fmt.Errorf("%w: entry %q goes through the symlink %q", ErrBadImage, hdr.Name, link)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if name != "." {
			if err := u.makeParent(name); err != nil {
				return err
			}
			if err := u.replace(name, true); err != nil {
				return err
			}
			if err := u.root.MkdirAll(name, 0o700); err != nil {
				return fmt.Errorf("unpack %s: %w", hdr.Name, err)
			}
		}
		u.dirs[name] = dirMeta{mode: dirMode(hdr.FileInfo().Mode()), mtime: hdr.ModTime}
		u.stats.Dirs++
	case tar.TypeReg, tar.TypeRegA:
		return u.file(name, hdr, body)
	case tar.TypeSymlink:
		return u.symlink(name, hdr)
	case tar.TypeLink:
		return u.hardlink(name, hdr)
	default:
		// Devices, fifos and vendor types: a machine needs none of them, and a
		// device node would give its user the host's hardware.
		u.stats.Skipped++
	}
	return nil
}

// dirMode keeps the permission bits and sticky bit, and always lets the owner
// in (the driver must be able to remove what it unpacked).
func dirMode(m fs.FileMode) fs.FileMode {
	return m&(fs.ModePerm|fs.ModeSticky) | 0o700
}

// makeParent creates the parent directories of name.
func (u *unpacker) makeParent(name string) error {
	if dir := path.Dir(name); dir != "." {
		if err := u.root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("unpack %s: %w", name, err)
		}
	}
	return nil
}

// replace makes room for a new entry at name: an existing directory stays when
// the new entry is one too; anything else is removed (a later archive entry
// wins, as with tar).
func (u *unpacker) replace(name string, isDir bool) error {
	st, err := u.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unpack %s: %w", name, err)
	}
	if st.IsDir() && isDir {
		return nil
	}
	if err := u.root.Remove(name); err != nil {
		return fmt.Errorf("%w: entry %q replaces something that cannot be removed: %v", ErrBadImage, name, err)
	}
	delete(u.symlinks, name)
	delete(u.files, name)
	delete(u.dirs, name)
	return nil
}

func (u *unpacker) file(name string, hdr *tar.Header, body io.Reader) error {
	if name == "." {
		return fmt.Errorf("%w: a file entry names the image directory itself", ErrBadImage)
	}
	if err := u.makeParent(name); err != nil {
		return err
	}
	if err := u.replace(name, false); err != nil {
		return err
	}
	out, err := u.root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("unpack %s: %w", hdr.Name, err)
	}
	var src io.Reader = body
	if u.limit > 0 {
		src = io.LimitReader(body, u.limit-u.stats.Bytes+1)
	}
	n, err := io.Copy(out, src)
	u.stats.Bytes += n
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("unpack %s: %w", hdr.Name, err)
	}
	if u.limit > 0 && u.stats.Bytes > u.limit {
		return fmt.Errorf("%w: unpacks to more than %d bytes (the template's resources.diskGB)", ErrBadImage, u.limit)
	}
	// Permission bits only: a setuid file would let anyone become its owner.
	if err := u.root.Chmod(name, hdr.FileInfo().Mode()&fs.ModePerm); err != nil {
		return fmt.Errorf("unpack %s: %w", hdr.Name, err)
	}
	if !hdr.ModTime.IsZero() {
		_ = u.root.Chtimes(name, hdr.ModTime, hdr.ModTime)
	}
	u.files[name] = true
	u.stats.Files++
	return nil
}

func (u *unpacker) symlink(name string, hdr *tar.Header) error {
	target := hdr.Linkname
	if target == "" {
		return fmt.Errorf("%w: symlink %q has no target", ErrBadImage, hdr.Name)
	}
	if strings.HasPrefix(target, "/") {
		return fmt.Errorf("%w: symlink %q points to the absolute path %q", ErrBadImage, hdr.Name, target)
	}
	// Parents of name are real directories (throughSymlink), so the lexical
	// resolution is the real one.
	if to := path.Join(path.Dir(name), target); to == ".." || strings.HasPrefix(to, "../") {
		return fmt.Errorf("%w: symlink %q points outside the image directory (%q)", ErrBadImage, hdr.Name, target)
	}
	if name == "." {
		return fmt.Errorf("%w: a symlink entry names the image directory itself", ErrBadImage)
	}
	if err := u.makeParent(name); err != nil {
		return err
	}
	if err := u.replace(name, false); err != nil {
		return err
	}
	if err := u.root.Symlink(target, name); err != nil {
		return fmt.Errorf("unpack %s: %w", hdr.Name, err)
	}
	u.symlinks[name] = true
	u.stats.Links++
	return nil
}

func (u *unpacker) hardlink(name string, hdr *tar.Header) error {
	old, err := cleanName(hdr.Linkname)
	if err != nil {
		return fmt.Errorf("%w: hard link %q points outside the image directory (%q)", ErrBadImage, hdr.Name, hdr.Linkname)
	}
	if !u.files[old] || u.throughSymlink(old) != "" {
		return fmt.Errorf("%w: hard link %q must point to a file earlier in the archive, not %q", ErrBadImage, hdr.Name, hdr.Linkname)
	}
	if name == old {
		return nil
	}
	if err := u.makeParent(name); err != nil {
		return err
	}
	if err := u.replace(name, false); err != nil {
		return err
	}
	if err := u.root.Link(old, name); err != nil {
		return fmt.Errorf("unpack %s: %w", hdr.Name, err)
	}
	u.files[name] = true
	u.stats.Links++
	return nil
}

// finish hands everything to the owner and applies the directories' modes and
// times last (writing into a directory changes its time, and a read-only
// directory would have refused the files).
func (u *unpacker) finish() error {
	if u.owner != nil {
		err := fs.WalkDir(u.root.FS(), ".", func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return u.root.Lchown(p, u.owner.UID, u.owner.GID)
		})
		if err != nil {
			return fmt.Errorf("unpack: chown: %w", err)
		}
	}
	for name, m := range u.dirs {
		if err := u.root.Chmod(name, m.mode); err != nil {
			return fmt.Errorf("unpack %s: %w", name, err)
		}
		if !m.mtime.IsZero() {
			_ = u.root.Chtimes(name, m.mtime, m.mtime)
		}
	}
	return nil
}
