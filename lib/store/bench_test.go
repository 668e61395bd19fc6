package store

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// bigClaim is a claim of about 700 bytes of JSON as the API returns it
// (about 500 of spec and metadata, the rest its derived Bound condition).
func bigClaim(name string) *types.MachineClaim {
	c := claim(name)
	c.Spec.Metadata = map[string]string{
		"course":  strings.Repeat("k", 1),
		"session": strings.Repeat("s", 1),
		"extra":   strings.Repeat("x", 2),
	}
	return c
}

func TestBigClaimIsAbout700Bytes(t *testing.T) {
	s, _ := newMemStore(t)
	rec, err := s.Put(bigClaim("c-000001"), PutOptions{})
	require.NoError(t, err)
	data, err := rec.JSON()
	require.NoError(t, err)
	require.InDelta(t, 700, len(data), 30)
}

func benchStore(b *testing.B, mem, sync bool) *Store {
	cfg := Config{NodeID: "n1", GCInterval: -1, SyncWrites: sync}
	if mem {
		cfg.InMemory = true
	} else {
		cfg.Dir = b.TempDir()
	}
	return openStore(b, cfg)
}

// BenchmarkPut measures one upsert of a 500-byte object, in memory, on disk
// and on disk with SyncWrites (an fsync per commit).
func BenchmarkPut(b *testing.B) {
	for _, bc := range []struct {
		name      string
		mem, sync bool
	}{{"mem", true, false}, {"disk", false, false}, {"disk-sync", false, true}} {
		b.Run(bc.name, func(b *testing.B) {
			s := benchStore(b, bc.mem, bc.sync)
			objs := make([]*types.MachineClaim, 1000)
			for i := range objs {
				objs[i] = bigClaim(fmt.Sprintf("c-%06d", i))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				o := objs[i%len(objs)]
				o.Metadata.CreatedAt = time.Time{}
				if _, err := s.Put(o, PutOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGet measures reading one object by name (raw record and typed).
func BenchmarkGet(b *testing.B) {
	s := benchStore(b, false, false)
	const n = 10000
	for i := range n {
		if _, err := s.Put(bigClaim(fmt.Sprintf("c-%06d", i)), PutOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("record", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := s.Get(types.KindMachineClaim, fmt.Sprintf("c-%06d", i%n)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := Get[types.MachineClaim](s, types.KindMachineClaim, fmt.Sprintf("c-%06d", i%n)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMemory100k stores 100k 500-byte objects on disk and reports the Go
// heap and the process RSS right after the load (badger's table builders still
// hold buffers), after a full List, and after 20 s idle (badger frees its
// pooled builder buffers one per 2 s), plus how long a reopen with its
// recovery scan takes. Run alone:
//
//	go test -run x -bench Memory100k -benchtime 1x ./lib/store/
func BenchmarkMemory100k(b *testing.B) {
	const n = 100_000
	for b.Loop() {
		dir := b.TempDir()
		cfg := Config{Dir: dir, NodeID: "n1", GCInterval: -1}
		s, err := Open(cfg, quietLog())
		require.NoError(b, err)
		start := time.Now()
		for i := range n {
			if _, err := s.Put(bigClaim(fmt.Sprintf("c-%06d", i)), PutOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/n, "us/put")
		reportMemory(b, "loaded")
		start = time.Now()
		list, err := s.List(types.KindMachineClaim)
		require.NoError(b, err)
		require.Len(b, list, n)
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "list-ms")
		list = nil
		reportMemory(b, "listed")
		time.Sleep(20 * time.Second)
		reportMemory(b, "idle")
		require.NoError(b, s.Close())

		start = time.Now()
		s, err = Open(cfg, quietLog())
		require.NoError(b, err)
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "open-ms")
		reportMemory(b, "reopened")
		require.NoError(b, s.Close())
	}
}

// reportMemory reports the heap in use and the RSS after a GC that returns
// freed memory to the OS.
func reportMemory(b *testing.B, when string) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), when+"-heap-MB")
	if rss, ok := rssBytes(); ok {
		b.ReportMetric(float64(rss)/(1<<20), when+"-rss-MB")
	}
}

// rssBytes reads VmRSS from /proc (Linux only).
func rssBytes() (int64, bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// BenchmarkUpdateFacet measures a read-modify-write of one facet, as the
// node's reconcilers write a claim's binding: read, decode, change, write.
func BenchmarkUpdateFacet(b *testing.B) {
	s := benchStore(b, false, false)
	_, err := s.Put(bigClaim("c-1"), PutOptions{})
	require.NoError(b, err)
	var round uint64
	for b.Loop() {
		round++
		_, err := UpdateFacet(s, types.KindMachineClaim, "c-1", types.FacetBinding, func(c *types.MachineClaim) error {
			c.Status.Binding = &types.ClaimBinding{Round: round, Phase: types.BindingBound, Machine: "m-1", Node: "n1"}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
