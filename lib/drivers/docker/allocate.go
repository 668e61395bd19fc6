package docker

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/hf-fleet/hf/lib/types"
)

// cleanupTimeout bounds removing what a failed allocation created; it runs on
// a context of its own, since the caller's may be what ended the allocation.
const cleanupTimeout = 30 * time.Second

// logTail is how many log lines a failed start reports.
const logTail = 20

// Allocate implements drivers.Driver: it finds the image (loading a tarball
// once), creates a container with the template's limits, the claim metadata
// as environment and the ownership labels on the driver's network, starts it
// and returns once it has kept running for start_grace. A container that
// exits fails the allocation with its exit code and last log lines. Whatever
// a failed allocation created is removed.
func (d *Driver) Allocate(ctx context.Context, t types.MachineTemplate, meta map[string]string) (*types.Resource, error) {
	st, err := d.state()
	if err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}
	tc, err := d.templateConfig(t)
	if err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}
	imageID, err := d.resolveImage(ctx, st, tc.Image)
	if err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}
	// The network may have been removed since Prepare; it is cheap to check.
	nw, unlock, err := d.machineNetwork(ctx, st, meta)
	if err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}
	spec, err := buildSpec(t, tc, meta, specInput{Labels: st.lbl, Network: nw.ID, NetworkName: nw.Name, ImageID: imageID,
		User: cmp.Or(tc.User, st.cfg.User), PidsLimit: st.cfg.PidsLimit})
	if err != nil {
		unlock()
		return nil, fmt.Errorf("allocate: %w", err)
	}
	created, err := st.cli.ContainerCreate(ctx, spec.Config, spec.HostConfig, spec.Networking, nil, spec.Name)
	unlock()
	started := false
	defer func() {
		if !started { // a user's network made for this machine goes with it
			d.releaseNetwork(st, nw.Name)
		}
	}()
	if err != nil {
		// A create the caller cancelled may still have happened on the engine.
		d.removeByName(st, spec.Name)
		return nil, fmt.Errorf("allocate: create container from %s: %w", tc.Image, err)
	}
	id := created.ID
	log := d.log.With("container", id, "name", spec.Name, "template", t.Metadata.Name)
	for _, w := range created.Warnings {
		log.Debug("docker create warning", "warning", w)
	}
	if err := d.ownVolumes(ctx, st, id, spec.Config.User, tc.Volumes); err != nil {
		d.remove(st, id)
		return nil, fmt.Errorf("allocate: container %s: %w", spec.Name, err)
	}
	r, err := d.start(ctx, st, id)
	if err != nil {
		d.remove(st, id)
		return nil, fmt.Errorf("allocate: container %s: %w", spec.Name, err)
	}
	started = true
	log.Info("docker container started", "image", tc.Image.String(), "claim", meta[types.MetaClaim], "network", nw.Name)
	return r, nil
}

// start starts container id and waits until it has run for start_grace (and
// at most start_timeout), then reads it back as a Resource.
func (d *Driver) start(ctx context.Context, st snapshot, id string) (*types.Resource, error) {
	ctx, cancel := context.WithTimeout(ctx, st.cfg.StartTimeout.Duration)
	defer cancel()
	if grace := st.cfg.StartGrace.Duration; grace > 0 {
		if err := d.startAndWatch(ctx, st, id, grace); err != nil {
			return nil, err
		}
	} else if err := st.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	c, err := st.cli.ContainerInspect(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	if c.State == nil || c.State.Status != container.StateRunning {
		code := -1
		if c.State != nil {
			code = c.State.ExitCode
		}
		return nil, d.startFailure(st, id, code)
	}
	r := resourceOf(d.env.Instance, st.lbl, fromInspect(c, st.cfg.Network))
	return &r, nil
}

// startAndWatch starts container id and watches it for grace: an exit within
// that time fails the start with the exit code and the container's log.
func (d *Driver) startAndWatch(ctx context.Context, st snapshot, id string, grace time.Duration) error {
	wctx, stop := context.WithCancel(ctx)
	// Registered before the start, so an exit right after it is seen.
	exited, waitErr := st.cli.ContainerWait(wctx, id, container.WaitConditionNextExit)
	answered := false
	defer func() {
		stop()
		if !answered {
			// Cancelled, the client's wait goroutine ends with exactly one
			// answer; take it, or the goroutine blocks forever on its send.
			go func() {
				select {
				case <-exited:
				case <-waitErr:
				}
			}()
		}
	}()
	if err := st.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case res := <-exited:
		answered = true
		return d.startFailure(st, id, int(res.StatusCode))
	case err := <-waitErr:
		answered = true
		if ctx.Err() != nil {
			return fmt.Errorf("start: %w", ctx.Err())
		}
		return fmt.Errorf("start: wait: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("start: %w", ctx.Err())
	case <-timer.C:
		return nil
	}
}

// startFailure describes a container that stopped right after its start: the
// exit code, the engine's error if any and the last lines of its log.
func (d *Driver) startFailure(st snapshot, id string, code int) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	return fmt.Errorf("%w: %s", ErrExited, d.exitReport(ctx, st, id, fmt.Sprintf("exited at once with code %d", code)))
}

// exitReport is msg about a container that ended, with what the engine
// says of its end (out of memory, its error) and the last lines of its log.
func (d *Driver) exitReport(ctx context.Context, st snapshot, id, msg string) string {
	if c, err := st.cli.ContainerInspect(ctx, id); err == nil && c.State != nil {
		if c.State.OOMKilled {
			msg += " (killed: out of memory)"
		}
		if c.State.Error != "" {
			msg += ": " + c.State.Error
		}
	}
	if lines := d.lastLogLines(ctx, st, id); lines != "" {
		msg += "; last log lines: " + lines
	}
	return msg
}

// lastLogLines returns the container's last log lines (stdout and stderr)
// joined with " | ", or "" when there are none or they cannot be read.
func (d *Driver) lastLogLines(ctx context.Context, st snapshot, id string) string {
	rc, err := st.cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: fmt.Sprint(logTail)})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil && out.Len() == 0 {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(out.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	s := strings.Join(lines, " | ")
	const maxLen = 2000
	if len(s) > maxLen {
		s = "..." + s[len(s)-maxLen:]
	}
	return s
}

// remove force-removes a container this driver just created, with its
// anonymous volumes.
func (d *Driver) remove(st snapshot, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := removeContainer(ctx, st, id, 0); err != nil {
		d.log.Warn("remove failed container", "container", id, "err", err)
	}
}

// removeByName removes the container called name if it exists and is ours.
func (d *Driver) removeByName(st snapshot, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	c, err := st.cli.ContainerInspect(ctx, name)
	if err != nil || c.Config == nil || !st.lbl.owns(c.Config.Labels) {
		return
	}
	if err := removeContainer(ctx, st, c.ID, 0); err != nil {
		d.log.Warn("remove half-created container", "container", c.ID, "err", err)
	}
}

// releaseNetwork removes a user's network that no container names any more
// (dropUserNetwork); trouble is logged, and the next start sweeps what is
// left (dropIdleUserNetworks).
func (d *Driver) releaseNetwork(st snapshot, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := d.dropUserNetwork(ctx, st, name); err != nil {
		d.log.Warn("remove user's network", "network", name, "err", err)
	}
}
