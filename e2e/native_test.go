package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// nativeConfig is a node config with one privileged native driver whose users
// start with prefix and whose workspaces and homes are under dir; more are
// further lines of the driver's config.
func nativeConfig(prefix, dir string, more ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `drivers:
  - name: native
    config:
      unprivileged: false
      user_prefix: %q
      workspace_path: %q
      home_path: %q
      stop_grace: 2s
`, prefix, filepath.Join(dir, "ws"), filepath.Join(dir, "home"))
	for _, m := range more {
		fmt.Fprintf(&b, "      %s\n", m)
	}
	return b.String()
}

// nativeEntry writes what the machine sees (its image, claim metadata,
// template env, user) to $HOME/entry.out and then sleeps as the machine's user.
const nativeEntry = `cat {{.Disks.data}}/greeting.txt > "$HOME/entry.out"
echo "claim=$HF_CLAIM greeting=$GREETING template=$FROM_TEMPLATE user=$(id -un) uid=$(id -u)" >> "$HOME/entry.out"
exec sleep 300`

// nativeTemplate is a small native template with one image at url.
func nativeTemplate(t *testing.T, name, url, sum string) types.MachineTemplate {
	return types.MachineTemplate{
		Metadata: types.ObjectMeta{Name: name},
		Spec: types.MachineTemplateSpec{
			Resources: types.Resources{CPU: 0.1, RAMGB: 0.1},
			ProviderConfiguration: map[string]json.RawMessage{"native": rawJSON(t, map[string]any{
				"images": []map[string]string{{"url": url, "sum": sum, "tag": "data"}},
				"entry":  nativeEntry,
				"env":    map[string]string{"FROM_TEMPLATE": "from-template"},
			})},
			ClaimMetadata: []types.MetadataKey{{Name: "GREETING"}},
		},
	}
}

// serveImage serves data at every path on 127.0.0.1 until the test ends.
func serveImage(t *testing.T, data []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/data.tar.gz"
}

// TestNativeThreeNodes is issue 5 acceptance 4: three hf-node processes with
// privileged native drivers; a claim binds on one of them, whose user exists
// and runs the entry with the claim's metadata; deleting the claim removes
// the user, its group, home, workspace and processes.
func TestNativeThreeNodes(t *testing.T) {
	needRoot(t)
	run := randHex(2)
	host := nativeHost(t)
	prefixes := []string{"hfe" + run + "a-", "hfe" + run + "b-", "hfe" + run + "c-"}
	cleanupUsers(t, prefixes...)
	img, sum := tarGz(t, map[string]string{"greeting.txt": "hello from the image\n"})
	url := serveImage(t, img)

	nodes := make([]*proc, 3)
	for i := range nodes {
		var extra []string
		if i > 0 {
			extra = []string{"--join", nodes[0].Gossip}
		}
		nodes[i] = startWithConfig(t, "", nativeConfig(prefixes[i], filepath.Join(host, fmt.Sprint(i))), extra...)
	}
	waitUp(t, nodes...)
	n1 := nodes[0]
	n1.createTemplate(nativeTemplate(t, "nat", url, sum))

	node, mname := n1.claimWait("e2e-native", "nat", "--meta", "GREETING=hi-there")
	idx := -1
	for i, p := range nodes {
		if p.Name == node {
			idx = i
		}
	}
	require.GreaterOrEqual(t, idx, 0, "bound on %s, not one of the three nodes", node)
	t.Logf("claim bound on node %d (%s), machine %s", idx+1, node, mname)

	m, err := nodes[(idx+1)%3].machine(mname)
	require.NoError(t, err, "the machine is seen from another node")
	require.Equal(t, types.MachineRunning, m.Status.Phase)
	require.NotNil(t, m.Status.Resource)
	id := m.Status.Resource.ID
	assert.True(t, strings.HasPrefix(id, prefixes[idx]), "resource %s has the prefix of node %d", id, idx+1)
	assert.Equal(t, id, m.Status.MachineInformation["user"])
	home := filepath.Join(host, fmt.Sprint(idx), "home", id)
	ws := filepath.Join(host, fmt.Sprint(idx), "ws", id)
	assert.Equal(t, home, m.Status.MachineInformation["home"])

	// The user exists, marked as the driver's, with its group and home.
	users := usersWithPrefix(t, prefixes[idx])
	require.Contains(t, users, id)
	u := users[id]
	assert.Equal(t, "hf-native "+node+"/native", u.GECOS)
	assert.Equal(t, home, u.Home)
	assert.True(t, groupExists(t, id), "the user's own group")
	for i, p := range prefixes {
		if i != idx {
			assert.Empty(t, usersWithPrefix(t, p), "node %d made no user", i+1)
		}
	}

	// The entry runs as the user with the image, metadata and env.
	want := fmt.Sprintf("hello from the image\nclaim=e2e-native greeting=hi-there template=from-template user=%s uid=%d\n", id, u.UID)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		b, err := os.ReadFile(filepath.Join(home, "entry.out"))
		assert.NoError(c, err)
		assert.Equal(c, want, string(b))
	}, 10*time.Second, 50*time.Millisecond)
	st, err := os.Stat(filepath.Join(home, "entry.out"))
	require.NoError(t, err)
	assert.Equal(t, uint32(u.UID), st.Sys().(*syscall.Stat_t).Uid, "the entry wrote as the machine's user")
	// The entry's shell execs its sleep after its last write.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		procs := procsOf(u.UID)
		if assert.NotEmpty(c, procs, "the entry runs as uid %d", u.UID) {
			assert.Equal(c, "sleep 300", procs[0].Cmd)
		}
	}, 10*time.Second, 20*time.Millisecond)
	assert.DirExists(t, filepath.Join(ws, "data"))

	// Releasing the claim removes everything of the machine.
	n1.mustCLI("claim", "delete", "e2e-native", "--wait")
	assert.NotContains(t, usersWithPrefix(t, prefixes[idx]), id)
	assert.False(t, groupExists(t, id), "group %s removed", id)
	assert.NoDirExists(t, home)
	assert.NoDirExists(t, ws)
	assert.Empty(t, procsOf(u.UID), "processes of uid %d", u.UID)
	_, err = n1.machine(mname)
	assert.ErrorIs(t, err, errNotFound)
}

// waitUp waits until every node sees all of them Up.
func waitUp(t *testing.T, nodes ...*proc) {
	t.Helper()
	for _, p := range nodes {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			out, err := p.run("node", "list")
			if !assert.NoError(c, err) {
				return
			}
			rows := nodeRows(out)
			for _, q := range nodes {
				assert.Equal(c, "Up", rows[q.Name], "node %s as seen from %s: %v", q.Name, p.Name, rows)
			}
		}, 15*time.Second, 100*time.Millisecond)
	}
}

// nativeState reads the native driver's state file of a node: id -> phase.
func nativeState(t *testing.T, dataDir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "drivers", "native", "native.json"))
	require.NoError(t, err)
	var st struct {
		Resources []struct {
			ID   string
			Data struct{ Phase string }
		}
	}
	require.NoError(t, json.Unmarshal(b, &st), string(b))
	out := map[string]string{}
	for _, r := range st.Resources {
		out[r.ID] = r.Data.Phase
	}
	return out
}

// entryProcs returns, per machine id with prefix, the live processes that
// carry HF_NATIVE_ID=<id> (every entry and its children do).
func entryProcs(prefix string) map[string][]hostProc {
	out := map[string][]hostProc{}
	for _, p := range hostProcs() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(b), "\x00") {
			if id, ok := strings.CutPrefix(kv, "HF_NATIVE_ID="); ok && strings.HasPrefix(id, prefix) {
				out[id] = append(out[id], p)
			}
		}
	}
	return out
}

// checkNativeMatchesStore asserts that the users and entry processes with
// prefix on this host are exactly those of the store's live machines of the
// node, each entry running as its machine's user.
func checkNativeMatchesStore(c *assert.CollectT, p *proc, prefix string) {
	ms, err := p.machines()
	if !assert.NoError(c, err) {
		return
	}
	var live []string
	for _, m := range ms {
		if m.Spec.Node == p.Name && m.Live() && m.Status.Resource != nil {
			live = append(live, m.Status.Resource.ID)
		}
	}
	sort.Strings(live)
	users := usersWithPrefix(c, prefix)
	var names []string
	for n := range users {
		names = append(names, n)
	}
	sort.Strings(names)
	assert.Equal(c, live, names, "users with %s = resources of the live machines", prefix)
	procs := entryProcs(prefix)
	var running []string
	for id, ps := range procs {
		running = append(running, id)
		for _, pr := range ps {
			assert.Equal(c, users[id].UID, pr.UID, "process %d (%s) of %s runs as its user", pr.PID, pr.Cmd, id)
		}
	}
	sort.Strings(running)
	assert.Equal(c, live, running, "entry processes = live machines")
}

// TestNativeCrashRecovery is issue 5 acceptance 5: hf-node killed with
// SIGKILL in the middle of a native allocation (while the image downloads,
// and after the user was made) leaves, once restarted on its data dir, no
// orphan user or process: the half-made machine is removed, its claim bound
// again, and a machine that was running is adopted.
func TestNativeCrashRecovery(t *testing.T) {
	needRoot(t)
	prefix := "hfe" + randHex(2) + "k-"
	host := nativeHost(t)
	cleanupUsers(t, prefix)

	// The image server stalls while stall is set, so the download (the first
	// step of an allocation) hangs until the client goes away.
	img, sum := tarGz(t, map[string]string{"greeting.txt": "hello from the image\n"})
	var stall atomic.Bool
	stall.Store(true)
	var hits atomic.Int64
	release := make(chan struct{})
	var releaseOnce sync.Once
	unstall := func() { stall.Store(false); releaseOnce.Do(func() { close(release) }) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if stall.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = w.Write(img)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(unstall) // before srv.Close, which waits for the handlers

	// useradd is wrapped so that, while the flag file exists, it returns only
	// seconds after the user was made: a window to kill hf-node in.
	slow := filepath.Join(host, "slow-useradd")
	wrapper := filepath.Join(host, "useradd")
	require.NoError(t, os.WriteFile(wrapper, []byte(fmt.Sprintf("#!/bin/sh\n%s \"$@\" || exit $?\nif [ -e %s ]; then sleep 5; fi\n",
		sbin("useradd"), slow)), 0o755))

	n := startWithConfig(t, "", nativeConfig(prefix, filepath.Join(host, "n"), "useradd_path: "+wrapper))
	n.createTemplate(nativeTemplate(t, "crash", srv.URL+"/data.tar.gz", sum))

	// 1. Killed while the image downloads.
	n.mustCLI("claim", "create", "c1", "--template", "crash")
	require.Eventually(t, func() bool { return hits.Load() > 0 }, 15*time.Second, 10*time.Millisecond, "download started")
	var first string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cl, err := n.claim("c1")
		assert.NoError(c, err)
		assert.Equal(c, types.ClaimRequested, cl.Status.Phase)
		assert.Equal(c, n.Name, cl.Status.Node)
		ms, err := n.machines()
		assert.NoError(c, err)
		if assert.Len(c, ms, 1) {
			assert.Equal(c, types.MachineProvisioning, ms[0].Status.Phase)
			first = ms[0].Metadata.Name
		}
	}, 10*time.Second, 50*time.Millisecond, "allocation in progress")
	n.kill()
	t.Logf("killed hf-node while machine %s downloaded its image", first)
	assert.Empty(t, usersWithPrefix(t, prefix), "no user is made before the image is there")
	unstall()

	n = n.restart()
	var m1, id1 string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cl, err := n.claim("c1")
		assert.NoError(c, err)
		assert.Equal(c, types.ClaimBound, cl.Status.Phase, cl.Status.Reason)
		assert.NotEqual(c, first, cl.Status.Machine, "re-allocated in a new machine")
		m1 = cl.Status.Machine
	}, 30*time.Second, 100*time.Millisecond, "c1 bound again after the restart")
	m, err := n.machine(m1)
	require.NoError(t, err)
	require.NotNil(t, m.Status.Resource)
	id1 = m.Status.Resource.ID
	if old, err := n.machine(first); err == nil {
		assert.Equal(t, types.MachineLost, old.Status.Phase, "the interrupted machine")
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) { checkNativeMatchesStore(c, n, prefix) }, 10*time.Second, 100*time.Millisecond)
	t.Logf("after the restart c1 is bound to %s (user %s)", m1, id1)
	// The entry's shell execs its sleep at last (later on a host that holds
	// the machine to its CPUs): its process, as it settles, is what must
	// outlive the crashes below.
	var entry1 []hostProc
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		entry1 = entryProcs(prefix)[id1]
		if assert.Len(c, entry1, 1) {
			assert.Equal(c, "sleep 300", entry1[0].Cmd)
		}
	}, 10*time.Second, 20*time.Millisecond, "c1's entry settles in its sleep")

	// 2. Killed after the user was made, before the allocation returned.
	require.NoError(t, os.WriteFile(slow, nil, 0o644))
	t.Cleanup(func() { _ = os.Remove(slow) })
	n.mustCLI("claim", "create", "c2", "--template", "crash")
	var id2 string
	var u2 passwdEntry
	require.Eventually(t, func() bool {
		for name, u := range usersWithPrefix(t, prefix) {
			if name != id1 {
				id2, u2 = name, u
				return true
			}
		}
		return false
	}, 15*time.Second, 5*time.Millisecond, "the second machine's user appears")
	assert.Equal(t, "allocating", nativeState(t, n.dataDir)[id2], "the allocation of %s is under way", id2)
	n.kill()
	t.Logf("killed hf-node after it made user %s (uid %d), before the allocation returned", id2, u2.UID)
	require.NoError(t, os.Remove(slow))
	assert.Contains(t, usersWithPrefix(t, prefix), id2, "the user outlives the daemon")

	n = n.restart()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cl, err := n.claim("c2")
		assert.NoError(c, err)
		assert.Equal(c, types.ClaimBound, cl.Status.Phase, cl.Status.Reason)
		checkNativeMatchesStore(c, n, prefix)
	}, 30*time.Second, 100*time.Millisecond, "c2 bound again and the host matches the store")
	users := usersWithPrefix(t, prefix)
	assert.NotContains(t, users, id2, "the half-made user is removed")
	assert.False(t, groupExists(t, id2), "and its group")
	reused := false
	for _, u := range users {
		reused = reused || u.UID == u2.UID // useradd hands a freed uid out again
	}
	if !reused {
		assert.Empty(t, procsOf(u2.UID), "processes of the removed uid %d", u2.UID)
	}
	assert.NoDirExists(t, filepath.Join(host, "n", "home", id2))
	assert.NoDirExists(t, filepath.Join(host, "n", "ws", id2))
	assert.Len(t, users, 2)

	// The machine that ran through both crashes was adopted, not replaced.
	cl, err := n.claim("c1")
	require.NoError(t, err)
	assert.Equal(t, types.ClaimBound, cl.Status.Phase)
	assert.Equal(t, m1, cl.Status.Machine)
	assert.Equal(t, entry1, entryProcs(prefix)[id1], "the entry process of c1 kept running")

	n.mustCLI("claim", "delete", "c1", "c2", "--wait")
	assert.Empty(t, usersWithPrefix(t, prefix))
	assert.Empty(t, entryProcs(prefix))
	state := nativeState(t, n.dataDir)
	assert.Empty(t, state, "the state file lists nothing")
}
