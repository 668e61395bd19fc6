package store

import "sync"

// internMax bounds the interned strings: kinds, facet names and the names of
// the nodes that wrote, a few dozen in a fleet of hundreds of nodes.
const internMax = 4096

// interned hands out one shared copy of each recurring string a record
// holds (its kind, its facets' names, the nodes that wrote them), where
// every decoded record held its own: at a million records that was tens of
// MB of copies of the same few words.
var interned = struct {
	sync.RWMutex
	m map[string]string
}{m: map[string]string{}}

// intern returns b as a string, shared with every other record that holds it.
func intern(b []byte) string {
	interned.RLock()
	s, ok := interned.m[string(b)]
	interned.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	interned.Lock()
	if len(interned.m) < internMax {
		interned.m[s] = s
	}
	interned.Unlock()
	return s
}
