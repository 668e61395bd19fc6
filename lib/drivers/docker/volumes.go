package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
)

// volumeMode is the mode of a volume's top directory once the machine's
// user owns it: the engine's own for a directory it makes.
const volumeMode = 0o755

// volumeOwners returns a tar archive whose directory entries give the
// template's volumes (absolute paths in the container) to user ("uid" or
// "uid:gid", checked), or nil when there is nothing to give: no volumes, or
// a root user, which owns what the engine makes. The engine makes a volume's
// directory as root unless the image has one there, so a container that runs
// as anyone else could not write to the volume its template asked for. A
// bare uid gets group 0, as the engine gives a uid that the image's passwd
// does not list; the owner's bits are what let it write.
func volumeOwners(user string, volumes []string) ([]byte, error) {
	if len(volumes) == 0 || user == "" {
		return nil, nil
	}
	uid, gid, err := parseUser(user)
	if err != nil || uid == 0 {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, v := range volumes {
		name := strings.TrimPrefix(path.Clean(v), "/") + "/"
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: volumeMode,
			Uid: int(uid), Gid: int(gid), ModTime: time.Unix(0, 0)}); err != nil {
			return nil, fmt.Errorf("volume %s: %w", v, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ownVolumes gives the volumes of created (not yet started) container id to
// its user (volumeOwners). The engine mounts a container's volumes for a
// copy into it, so the archive's directories land on the volumes' own top
// directories, on whatever host the engine runs.
func (d *Driver) ownVolumes(ctx context.Context, st snapshot, id, user string, volumes []string) error {
	archive, err := volumeOwners(user, volumes)
	if err != nil || archive == nil {
		return err
	}
	if err := st.cli.CopyToContainer(ctx, id, "/", bytes.NewReader(archive), container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("give volumes to user %s: %w", user, err)
	}
	return nil
}
