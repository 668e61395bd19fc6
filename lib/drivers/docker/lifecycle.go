package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// Status implements drivers.Driver from the engine's state of the container:
// running (or paused) is Running, exited with code 0 Terminated, any other
// exit Failed, and a container that is gone or not this driver's is
// drivers.ErrNotFound.
func (d *Driver) Status(ctx context.Context, r *types.Resource) (types.MachinePhase, error) {
	if r == nil {
		return "", errors.New("status: nil resource")
	}
	st, err := d.state()
	if err != nil {
		return "", fmt.Errorf("status %s: %w", r.ID, err)
	}
	c, err := d.inspectOwn(ctx, st, r.ID)
	if err != nil {
		return "", fmt.Errorf("status %s: %w", r.ID, err)
	}
	o := fromInspect(c, st.cfg.Network)
	return phaseOf(o.State, o.ExitCode), nil
}

// Explain implements drivers.Explainer: a container that ended, by its exit
// code, the engine's word on its end and its last log lines.
func (d *Driver) Explain(ctx context.Context, r *types.Resource) string {
	if r == nil {
		return ""
	}
	st, err := d.state()
	if err != nil {
		return ""
	}
	c, err := d.inspectOwn(ctx, st, r.ID)
	if err != nil || c.ContainerJSONBase == nil || c.State == nil || c.State.Running {
		return ""
	}
	return d.exitReport(ctx, st, c.ID, fmt.Sprintf("container exited with code %d", c.State.ExitCode))
}

// Activity implements drivers.ActivityMeter: the container's total CPU time
// in nanoseconds, from the engine's one-shot stats.
func (d *Driver) Activity(ctx context.Context, r *types.Resource) (uint64, error) {
	if r == nil {
		return 0, errors.New("activity: nil resource")
	}
	st, err := d.state()
	if err != nil {
		return 0, fmt.Errorf("activity %s: %w", r.ID, err)
	}
	if _, err := d.inspectOwn(ctx, st, r.ID); err != nil {
		return 0, fmt.Errorf("activity %s: %w", r.ID, err)
	}
	rd, err := st.cli.ContainerStatsOneShot(ctx, r.ID)
	if err != nil {
		return 0, fmt.Errorf("activity %s: %w", r.ID, err)
	}
	defer rd.Body.Close()
	var stats container.StatsResponse
	if err := json.NewDecoder(rd.Body).Decode(&stats); err != nil {
		return 0, fmt.Errorf("activity %s: decode stats: %w", r.ID, err)
	}
	return stats.CPUStats.CPUUsage.TotalUsage, nil
}

// Pause implements drivers.Pauser: the engine freezes the container's
// processes (docker pause); pausing a paused container is not an error.
func (d *Driver) Pause(ctx context.Context, r *types.Resource) error {
	return d.setPaused(ctx, r, true)
}

// Resume implements drivers.Pauser (docker unpause).
func (d *Driver) Resume(ctx context.Context, r *types.Resource) error {
	return d.setPaused(ctx, r, false)
}

func (d *Driver) setPaused(ctx context.Context, r *types.Resource, paused bool) error {
	verb := map[bool]string{true: "pause", false: "resume"}[paused]
	if r == nil {
		return fmt.Errorf("%s: nil resource", verb)
	}
	st, err := d.state()
	if err != nil {
		return fmt.Errorf("%s %s: %w", verb, r.ID, err)
	}
	for attempt := 1; ; attempt++ {
		c, err := d.inspectOwn(ctx, st, r.ID)
		if err != nil {
			return fmt.Errorf("%s %s: %w", verb, r.ID, err)
		}
		if c.State != nil && c.State.Paused == paused {
			return nil
		}
		if paused {
			err = st.cli.ContainerPause(ctx, r.ID)
		} else {
			err = st.cli.ContainerUnpause(ctx, r.ID)
		}
		if err == nil {
			return nil
		}
		if !freezeRaced(err) || attempt == freezeAttempts {
			return fmt.Errorf("%s %s: %w", verb, r.ID, err)
		}
		d.log.Debug("container freeze raced, trying again", "container", r.ID, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s: %w (after %w)", verb, r.ID, ctx.Err(), err)
		case <-time.After(time.Duration(attempt) * freezeBackoff):
		}
	}
}

// The runtime can fail to freeze a container whose processes are changing
// state as the freezer walks them (runc: "unable to freeze", after which it
// thaws the container again); the engine then reports the error and nothing
// has changed. Such a pause is tried again, freezeAttempts times in all,
// waiting freezeBackoff longer after each failure (under 3 s in all).
const (
	freezeAttempts = 7
	freezeBackoff  = 100 * time.Millisecond
)

// freezeRaced tells the engine's report of a raced freeze from other errors.
func freezeRaced(err error) bool {
	return strings.Contains(err.Error(), "unable to freeze")
}

// inspectOwn inspects container id; one that is gone or not this driver's is
// drivers.ErrNotFound.
func (d *Driver) inspectOwn(ctx context.Context, st snapshot, id string) (container.InspectResponse, error) {
	if id == "" {
		return container.InspectResponse{}, drivers.ErrNotFound
	}
	c, err := st.cli.ContainerInspect(ctx, id)
	if cerrdefs.IsNotFound(err) {
		return container.InspectResponse{}, drivers.ErrNotFound
	}
	if err != nil {
		return container.InspectResponse{}, err
	}
	if c.Config == nil || !st.lbl.owns(c.Config.Labels) {
		return container.InspectResponse{}, fmt.Errorf("%w: %w", drivers.ErrNotFound, ErrForeign)
	}
	return c, nil
}

// Deallocate implements drivers.Driver: it stops the container (SIGTERM, then
// SIGKILL after stop_timeout) and removes it with its anonymous volumes. A
// container that is gone already is not an error; one that belongs to someone
// else is left alone and reported (ErrForeign).
func (d *Driver) Deallocate(ctx context.Context, r *types.Resource) error {
	if r == nil {
		return errors.New("deallocate: nil resource")
	}
	st, err := d.state()
	if err != nil {
		return fmt.Errorf("deallocate %s: %w", r.ID, err)
	}
	c, err := d.inspectOwn(ctx, st, r.ID)
	switch {
	case errors.Is(err, ErrForeign):
		return fmt.Errorf("deallocate %s: %w", r.ID, ErrForeign)
	case errors.Is(err, drivers.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("deallocate %s: %w", r.ID, err)
	}
	if err := removeContainer(ctx, st, c.ID, st.cfg.StopTimeout.Seconds()); err != nil {
		return fmt.Errorf("deallocate %s: %w", r.ID, err)
	}
	d.log.Info("docker container removed", "container", c.ID, "name", strings.TrimPrefix(c.Name, "/"))
	if c.Config != nil {
		d.releaseNetwork(st, c.Config.Labels[st.lbl.key(labelNetwork)])
	}
	return nil
}

// removeContainer stops container id, giving it stopSeconds (rounded up)
// after SIGTERM, and removes it with its anonymous volumes. Gone is success,
// and so is a removal already under way.
func removeContainer(ctx context.Context, st snapshot, id string, stopSeconds float64) error {
	if stopSeconds > 0 {
		secs := int(math.Ceil(stopSeconds))
		err := st.cli.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs})
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		if err != nil && !cerrdefs.IsConflict(err) {
			return fmt.Errorf("stop: %w", err)
		}
	}
	err := st.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	switch {
	case err == nil, cerrdefs.IsNotFound(err):
		return nil
	case cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress"):
		return nil
	}
	return fmt.Errorf("remove: %w", err)
}

// List implements drivers.Driver: every container with this driver's node and
// instance labels in its namespace, in any state, sorted by id.
func (d *Driver) List(ctx context.Context) ([]types.Resource, error) {
	st, err := d.state()
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	args := filters.NewArgs()
	for _, f := range st.lbl.filter() {
		args.Add("label", f)
	}
	list, err := st.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	out := make([]types.Resource, 0, len(list))
	for _, c := range list {
		if !st.lbl.owns(c.Labels) || c.State == container.StateRemoving {
			continue
		}
		out = append(out, resourceOf(d.env.Instance, st.lbl, fromSummary(c, st.cfg.Network)))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Logs implements drivers.LogReader: the container's stdout and stderr
// through the engine, the last opts.Tail lines first; with Follow, until
// the container stops or ctx ends.
func (d *Driver) Logs(ctx context.Context, r *types.Resource, opts drivers.LogOptions, w io.Writer) error {
	if r == nil {
		return errors.New("logs: nil resource")
	}
	st, err := d.state()
	if err != nil {
		return fmt.Errorf("logs %s: %w", r.ID, err)
	}
	c, err := d.inspectOwn(ctx, st, r.ID)
	if err != nil {
		return fmt.Errorf("logs %s: %w", r.ID, err)
	}
	tail := "all"
	if opts.Tail > 0 {
		tail = fmt.Sprint(opts.Tail)
	}
	rc, err := st.cli.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: opts.Follow, Tail: tail})
	if err != nil {
		return fmt.Errorf("logs %s: %w", r.ID, err)
	}
	defer rc.Close()
	if _, err := stdcopy.StdCopy(w, w, rc); err != nil && ctx.Err() == nil {
		return fmt.Errorf("logs %s: %w", r.ID, err)
	}
	return nil
}
