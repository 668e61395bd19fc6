package cluster

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// groupsDriver is a driver that allows some host groups (as native does).
type groupsDriver struct {
	drivers.Driver
	groups []string
}

func (d groupsDriver) AllowedGroups() []string { return d.groups }

// A node reports the groups each driver allows, empty when none, so the
// API can check groups against them; a driver with no such list reports
// none at all.
func TestReportAllowedGroups(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(store.Config{Dir: filepath.Join(dir, "store"), NodeID: "n1"}, testLogger())
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	var instances []Instance
	for _, name := range []string{"plain", "video", "none"} {
		drv := testdriver.New(drivers.Env{Instance: name, DataDir: filepath.Join(dir, name), NodeName: "n1", Log: testLogger()})
		require.NoError(t, drv.Prepare(context.Background(), []byte(`{"cpus": 1, "ram_gb": 1}`)))
		switch name {
		case "video":
			drv = groupsDriver{drv, []string{"video"}}
		case "none":
			drv = groupsDriver{drv, nil}
		}
		instances = append(instances, Instance{Name: name, Type: "test", Driver: drv})
	}
	n, err := New(Config{Name: "n1"}, testLogger(), st, instances, nil)
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(func() { _ = n.Stop(context.Background()) })

	node, err := store.Get[types.Node](st, types.KindNode, "n1")
	require.NoError(t, err)
	require.Len(t, node.Spec.Drivers, 3)
	assert.Nil(t, node.Spec.Drivers[0].AllowedGroups, "a driver without the list")
	assert.Equal(t, []string{"video"}, node.Spec.Drivers[1].AllowedGroups)
	assert.Equal(t, []string{}, node.Spec.Drivers[2].AllowedGroups, "allows none: empty, not absent")
}
