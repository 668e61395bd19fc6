package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/hf-fleet/hf/lib/types"
)

// ensureNetwork returns the network called name, creating it as a
// bridge network labelled "<ns>.network" when there is none. A network someone
// else made is used as it is.
//
// Several nodes sharing one engine may create the network at the same moment,
// and the engine's duplicate check does not stop that (seen on 20.10): each
// creator waits a moment for the others' creates to land, then lists the
// networks of that name; all pick the same one (the oldest, ties by id) and
// each removes its own if it lost, so every container ends up on one network.
// (Under load, listing at once could miss an older duplicate still being
// created, and two networks stayed: seen once in CI, and again with the
// settle below. So the nodes of one host first take a lock of that host,
// lockNetwork, and create the network one after the other; the settle is
// for nodes of several hosts on one remote engine.)
//
// A network it makes has inter-container traffic off unless icc: machines on
// it reach the world and the host's published ports, not each other.
//
// extra are labels a network it makes carries besides its own.
func ensureNetwork(ctx context.Context, cli *client.Client, name string, lbl labels, icc bool, extra map[string]string) (network.Summary, error) {
	existing, err := networksNamed(ctx, cli, name)
	if err != nil {
		return network.Summary{}, err
	}
	if len(existing) > 0 {
		return pickNetwork(existing), nil
	}
	unlock := lockNetwork(ctx, networkLockDir(), cli.DaemonHost(), name)
	defer unlock()
	// Another node of this host may have made it while this one waited.
	if existing, err = networksNamed(ctx, cli, name); err != nil {
		return network.Summary{}, err
	}
	if len(existing) > 0 {
		return pickNetwork(existing), nil
	}
	opts := network.CreateOptions{
		Driver: "bridge",
		Labels: map[string]string{lbl.key(labelNetwork): name, lbl.key(labelNode): lbl.node},
	}
	maps.Copy(opts.Labels, extra)
	if !icc {
		opts.Options = map[string]string{optionICC: "false"}
	}
	created, err := cli.NetworkCreate(ctx, name, opts)
	// Let racing creates land before judging: a network older than ours
	// that a list made at once would miss must win here too. Ours wins only
	// when two lists a settle apart agree (a loaded engine has listed a
	// racing create a few hundred milliseconds late: two networks stayed, in
	// CI); a refusal may mean another node won the race, and what is there
	// now counts.
	var found []network.Summary
	for try := 0; ; try++ {
		if err == nil {
			select {
			case <-ctx.Done():
				return network.Summary{}, ctx.Err()
			case <-time.After(networkSettle):
			}
		}
		prev := found
		var lerr error
		if found, lerr = networksNamed(ctx, cli, name); lerr != nil {
			return network.Summary{}, lerr
		}
		if err != nil || len(found) == 0 || try == networkChecks-1 ||
			(len(prev) > 0 && pickNetwork(prev).ID == pickNetwork(found).ID) || pickNetwork(found).ID != created.ID {
			break
		}
	}
	if len(found) == 0 {
		if err == nil {
			err = fmt.Errorf("created network %s but the engine does not list it", name)
		}
		return network.Summary{}, fmt.Errorf("create network %s: %w", name, err)
	}
	winner := pickNetwork(found)
	if err == nil && created.ID != winner.ID {
		// Ours lost: remove it, so every container ends up on the winner.
		// Best effort: should a node have attached to ours meanwhile, a
		// leftover costs nothing but a name clash that pickNetwork resolves.
		_ = cli.NetworkRemove(ctx, created.ID)
	}
	return winner, nil
}

// networkLockWait is how long a node waits for another of its host to
// create the network (lockNetwork) before it goes on without the lock.
const networkLockWait = 30 * time.Second

// networkSettle is how long a node that created the network waits before it
// looks for racing duplicates; it looks up to networkChecks times.
const (
	networkSettle = 100 * time.Millisecond
	networkChecks = 5
)

// optionICC is the bridge driver's option that turns inter-container
// traffic on a network on or off.
const optionICC = "com.docker.network.bridge.enable_icc"

// isolated reports whether n has inter-container traffic off.
func isolated(n network.Summary) bool { return n.Options[optionICC] == "false" }

// networksNamed lists the networks called exactly name (the engine's name
// filter also matches parts of names).
func networksNamed(ctx context.Context, cli *client.Client, name string) ([]network.Summary, error) {
	list, err := cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	var out []network.Summary
	for _, n := range list {
		if n.Name == name {
			out = append(out, n)
		}
	}
	return out, nil
}

// pickNetwork chooses among networks of one name the one every node picks:
// the oldest, ties broken by id. list must not be empty.
func pickNetwork(list []network.Summary) network.Summary {
	sort.Slice(list, func(i, j int) bool {
		if !list[i].Created.Equal(list[j].Created) {
			return list[i].Created.Before(list[j].Created)
		}
		return list[i].ID < list[j].ID
	})
	return list[0]
}

// userNetwork is the name of user's own network (network_per_user): the
// driver's network name, a dash and the user (a user name is already what a
// network name may hold).
func userNetwork(base, user string) string { return base + "-" + user }

// machineNetwork returns the network a machine for meta joins: the user's
// own with network_per_user and a user in meta, made when missing, else the
// driver's. unlock, called once the container is created, lets a release of
// the user's last machine remove the network again: until then no such
// release can, so the network stays for the container being made (a
// container only created has no endpoint on it for the engine to refuse a
// removal over).
func (d *Driver) machineNetwork(ctx context.Context, st snapshot, meta map[string]string) (nw network.Summary, unlock func(), err error) {
	user := meta[types.MetaUser]
	if !st.cfg.NetworkPerUser || user == "" {
		nw, err = ensureNetwork(ctx, st.cli, st.cfg.Network, st.lbl, st.cfg.NetworkICC, nil)
		return nw, func() {}, err
	}
	name := userNetwork(st.cfg.Network, user)
	unlock = lockNetwork(ctx, networkLockDir(), st.cli.DaemonHost(), usersLock(name))
	nw, err = ensureNetwork(ctx, st.cli, name, st.lbl, true, map[string]string{st.lbl.key(labelUser): user})
	if err != nil {
		unlock()
		return network.Summary{}, func() {}, err
	}
	return nw, unlock, nil
}

// usersLock names the lock that orders the uses of a user's network: the
// creates of containers on it and its removal (not the lock of its making).
func usersLock(name string) string { return name + "\x00users" }

// dropUserNetwork removes the user's network name once no container (of
// any node or state, created ones included) names it; the driver's own
// network, and networks that are not a user's, are kept.
func (d *Driver) dropUserNetwork(ctx context.Context, st snapshot, name string) error {
	if name == "" || name == st.cfg.Network {
		return nil
	}
	list, err := networksNamed(ctx, st.cli, name)
	if err != nil || len(list) == 0 {
		return err
	}
	unlock := lockNetwork(ctx, networkLockDir(), st.cli.DaemonHost(), usersLock(name))
	defer unlock()
	users, err := st.cli.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", st.lbl.key(labelNetwork)+"="+name))})
	if err != nil {
		return fmt.Errorf("list containers of network %s: %w", name, err)
	}
	if len(users) > 0 {
		return nil
	}
	var errs []error
	for _, n := range list {
		if n.Labels[st.lbl.key(labelUser)] == "" {
			continue // not a user's network of this namespace: not ours to remove
		}
		if err := st.cli.NetworkRemove(ctx, n.ID); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove network %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// dropIdleUserNetworks removes the users' networks of this namespace that no
// container names, left by a node that stopped between a release and the
// removal.
func (d *Driver) dropIdleUserNetworks(ctx context.Context, st snapshot) error {
	list, err := st.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", st.lbl.key(labelUser)))})
	if err != nil {
		return fmt.Errorf("list users' networks: %w", err)
	}
	var errs []error
	for _, n := range list {
		if strings.HasPrefix(n.Name, st.cfg.Network+"-") {
			errs = append(errs, d.dropUserNetwork(ctx, st, n.Name))
		}
	}
	return errors.Join(errs...)
}
