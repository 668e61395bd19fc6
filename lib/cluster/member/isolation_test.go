package member_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/member"
	"github.com/hf-fleet/hf/lib/cluster/member/membertest"
	"github.com/hf-fleet/hf/lib/types"
)

func TestClustersStayApart(t *testing.T) {
	keyA := []byte("0123456789abcdef")
	keyB := []byte("fedcba9876543210fedcba98")
	tests := []struct {
		name           string
		keyA, keyB     []byte
		labelA, labelB string
	}{
		{name: "different keys", keyA: keyA, keyB: keyB},
		{name: "key and no key", keyA: keyA},
		{name: "different labels", labelA: "lab-a", labelB: "lab-b"},
		{name: "label and no label", labelA: "lab-a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			net := membertest.NewNetwork()
			cfgA, cfgB := membertest.FastConfig(), membertest.FastConfig()
			cfgA.Key, cfgA.Label = tt.keyA, tt.labelA
			cfgB.Key, cfgB.Label = tt.keyB, tt.labelB
			a := membertest.Start(t, 2, membertest.Options{Config: cfgA, Net: net, Prefix: "a", InMemory: true})
			b := membertest.Start(t, 2, membertest.Options{Config: cfgB, Net: net, Prefix: "b", InMemory: true})
			recA := put(t, a.Nodes[0].Store, "from-a", "alice")
			recB := put(t, b.Nodes[0].Store, "from-b", "bob")
			a.WaitConverged(5 * time.Second)
			b.WaitConverged(5 * time.Second)

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := b.Nodes[0].Member.Join(ctx, []string{a.Nodes[0].Addr})
			assert.Error(t, err, "b joined a")
			_, err = a.Nodes[1].Member.Join(ctx, []string{b.Nodes[1].Addr})
			assert.Error(t, err, "a joined b")

			apart := func() bool {
				for _, n := range a.Nodes {
					if !slices.Equal(n.Member.Members(), []string{"a0", "a1"}) ||
						hasVersion(n.Store, types.KindMachineClaim, "from-b", recB.Version) {
						return false
					}
				}
				for _, n := range b.Nodes {
					if !slices.Equal(n.Member.Members(), []string{"b0", "b1"}) ||
						hasVersion(n.Store, types.KindMachineClaim, "from-a", recA.Version) {
						return false
					}
				}
				return true
			}
			// Several rejoin and anti-entropy intervals.
			require.Never(t, func() bool { return !apart() }, time.Second, 50*time.Millisecond)
		})
	}
}

func TestConfigValidation(t *testing.T) {
	st := openMemStore(t, "n1")
	tests := []struct {
		name string
		cfg  member.Config
		want string
	}{
		{"no name", member.Config{Bind: "127.0.0.1:0"}, "name"},
		{"bad name", member.Config{Name: "N_1", Bind: "127.0.0.1:0"}, "name"},
		{"name differs from store", member.Config{Name: "n2", Bind: "127.0.0.1:0"}, "node id"},
		{"no bind", member.Config{Name: "n1"}, "bind"},
		{"bad bind port", member.Config{Name: "n1", Bind: "127.0.0.1:x"}, "bind"},
		{"bad advertise", member.Config{Name: "n1", Bind: "127.0.0.1:0", Advertise: "nowhere"}, "advertise"},
		{"short key", member.Config{Name: "n1", Bind: "127.0.0.1:0", Key: []byte("short")}, "key"},
		{"long label", member.Config{Name: "n1", Bind: "127.0.0.1:0", Label: string(make([]byte, 256))}, "label"},
		{"bad profile", member.Config{Name: "n1", Bind: "127.0.0.1:0", Profile: "moon"}, "profile"},
		{"probe timeout too long", member.Config{Name: "n1", Bind: "127.0.0.1:0", ProbeInterval: time.Second, ProbeTimeout: 2 * time.Second}, "probe timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := member.New(tt.cfg, nil, st)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestStartOnRealNetTransport(t *testing.T) {
	// Without an injected transport: memberlist's own NetTransport on Bind,
	// with port 0 read back.
	st1, st2 := openMemStore(t, "r1"), openMemStore(t, "r2")
	cfg := membertest.FastConfig()
	cfg.Name, cfg.Bind, cfg.Key = "r1", "127.0.0.1:0", []byte("0123456789abcdef")
	m1, err := member.New(cfg, nil, st1)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, m1.Start(ctx))
	t.Cleanup(func() { _ = m1.Stop(ctx) })
	require.NotEqual(t, "127.0.0.1:0", m1.Addr())

	cfg.Name, cfg.Join = "r2", []string{m1.Addr()}
	m2, err := member.New(cfg, nil, st2)
	require.NoError(t, err)
	require.NoError(t, m2.Start(ctx))
	t.Cleanup(func() { _ = m2.Stop(ctx) })
	require.Eventually(t, func() bool { return slices.Equal(m1.Members(), []string{"r1", "r2"}) }, 5*time.Second, 10*time.Millisecond)

	rec := put(t, st1, "c1", "alice")
	require.Eventually(t, func() bool { return hasVersion(st2, types.KindMachineClaim, "c1", rec.Version) }, 10*time.Second, 5*time.Millisecond)
	assert.ErrorContains(t, m2.Start(ctx), "already started")
}
