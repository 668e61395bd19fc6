package scheduler

import "hash/fnv"

// Weight is the rendezvous weight of member for key: FNV-1a 64 of
// key + "\x00" + member, passed through the murmur3 finalizer so that keys and
// members differing only in their last bytes still spread evenly. It is stable
// across builds, platforms and restarts, so every node computes the same value.
// Owner, the rank tie-break and conflict resolution all use it.
func Weight(key, member string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(member))
	return mix64(h.Sum64())
}

// mix64 is the murmur3 64-bit finalizer (full avalanche).
func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Owner picks the member that owns key by rendezvous (highest random weight)
// hashing: the member with the highest Weight(key, member). Every node that
// knows the same members picks the same owner whatever their order, and when a
// member leaves only the keys it owned move. Owner returns "" for no members.
// Empty names are ignored; equal weights (vanishingly rare) go to the
// lexically smaller name.
func Owner(key string, members []string) string {
	best, bestW := "", uint64(0)
	for _, m := range members {
		if m == "" {
			continue
		}
		w := Weight(key, m)
		if best == "" || w > bestW || (w == bestW && m < best) {
			best, bestW = m, w
		}
	}
	return best
}
