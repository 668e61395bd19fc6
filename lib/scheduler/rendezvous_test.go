package scheduler

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func members(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("node-%d", i)
	}
	return out
}

func TestOwnerEmpty(t *testing.T) {
	assert.Equal(t, "", Owner("claim", nil))
	assert.Equal(t, "", Owner("claim", []string{}))
	assert.Equal(t, "", Owner("claim", []string{""}))
	assert.Equal(t, "a", Owner("claim", []string{"", "a"}))
}

func TestOwnerDeterministic(t *testing.T) {
	ms := members(5)
	for i := range 100 {
		key := fmt.Sprintf("claim-%d", i)
		first := Owner(key, ms)
		require.Contains(t, ms, first)
		assert.Equal(t, first, Owner(key, slices.Clone(ms)))
	}
	// Weight is a fixed function: a changed hash would move every claim's
	// elector across a rolling upgrade, so pin one value (computed independently:
	// FNV-1a 64 of "claim-1\x00node-1", then the murmur3 finalizer).
	assert.NotEqual(t, Weight("ab", "c"), Weight("a", "bc"), "the separator keeps key and member apart")
	assert.Equal(t, uint64(0x2ab7cd1d512a3a19), Weight("claim-1", "node-1"))
}

func TestOwnerOrderIndependent(t *testing.T) {
	ms := members(7)
	orders := [][]string{ms, slices.Clone(ms), slices.Clone(ms)}
	slices.Reverse(orders[1])
	orders[2] = append(orders[2][3:], orders[2][:3]...)
	for i := range 500 {
		key := fmt.Sprintf("k%d", i)
		want := Owner(key, orders[0])
		for _, o := range orders[1:] {
			assert.Equal(t, want, Owner(key, o), "key %s", key)
		}
	}
}

func TestOwnerBalance(t *testing.T) {
	ms := members(10)
	counts := map[string]int{}
	const keys = 10000
	for i := range keys {
		counts[Owner(fmt.Sprintf("claim-%d", i), ms)]++
	}
	fair := keys / len(ms)
	for _, m := range ms {
		assert.InDelta(t, fair, counts[m], 0.3*float64(fair), "member %s owns %d keys", m, counts[m])
	}
}

func TestOwnerMinimalDisruption(t *testing.T) {
	ms := members(10)
	leaving := "node-4"
	rest := slices.DeleteFunc(slices.Clone(ms), func(m string) bool { return m == leaving })
	moved := 0
	for i := range 10000 {
		key := fmt.Sprintf("claim-%d", i)
		before, after := Owner(key, ms), Owner(key, rest)
		if before == leaving {
			moved++
			assert.NotEqual(t, leaving, after)
			continue
		}
		assert.Equal(t, before, after, "key %s moved though its owner stayed", key)
	}
	assert.Greater(t, moved, 0)

	// A member joining takes keys only for itself.
	joined := append(slices.Clone(ms), "node-new")
	for i := range 10000 {
		key := fmt.Sprintf("claim-%d", i)
		if after := Owner(key, joined); after != "node-new" {
			assert.Equal(t, Owner(key, ms), after)
		}
	}
}
