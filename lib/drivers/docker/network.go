package docker

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
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
func ensureNetwork(ctx context.Context, cli *client.Client, name string, lbl labels, icc bool) (network.Summary, error) {
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
