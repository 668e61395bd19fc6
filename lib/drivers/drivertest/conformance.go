// Package drivertest is the conformance harness every driver runs in its tests:
// allocate -> status -> list -> deallocate -> nothing left behind, survival of a
// restart, concurrent allocations and cancelled allocations.
//
//	func TestConformance(t *testing.T) {
//		drivertest.Conformance(t, drivertest.Harness{
//			New: func(t *testing.T, dataDir string) drivers.Driver { ... prepared driver ... },
//			Template: tmpl,
//		})
//	}
package drivertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// Harness describes the driver under test.
type Harness struct {
	// New returns a PREPARED driver keeping its state in dataDir. Two drivers on
	// the same dir are the same host before and after a restart. Required.
	New func(t *testing.T, dataDir string) drivers.Driver
	// Template is a template this driver can serve.
	Template types.MachineTemplate
	// Meta is the claim metadata passed to Allocate; a sample when nil.
	Meta map[string]string
	// CheckGone, when set, proves in a driver-specific way that nothing of r is
	// left (no user, process, container, VM).
	CheckGone func(t *testing.T, r types.Resource)
	// CheckRunning, when set, proves in a driver-specific way that r exists and
	// got Meta.
	CheckRunning func(t *testing.T, r types.Resource)
	// Concurrency is how many allocations run at once in the concurrency check
	// (default 4).
	Concurrency int
	// Timeout bounds how long a resource may take to become Running after
	// Allocate and to be gone after Deallocate (default 30s).
	Timeout time.Duration
}

func (h Harness) withDefaults() Harness {
	if h.Meta == nil {
		h.Meta = map[string]string{"claim": "conformance-claim", "lab_user": "conformance-user"}
	}
	if h.Concurrency <= 0 {
		h.Concurrency = 4
	}
	if h.Timeout <= 0 {
		h.Timeout = 30 * time.Second
	}
	return h
}

// poll is how often the harness asks Status while waiting: fast for in-memory
// drivers, gentle on cloud APIs.
func (h Harness) poll() time.Duration {
	return min(max(h.Timeout/300, 10*time.Millisecond), 2*time.Second)
}

// Conformance runs the shared driver checks as subtests of t.
func Conformance(t *testing.T, h Harness) {
	t.Helper()
	require.NotNil(t, h.New, "Harness.New is required")
	h = h.withDefaults()
	c := &checker{h: h}

	t.Run("ValidateTemplate", func(t *testing.T) {
		d := h.New(t, t.TempDir())
		require.NoError(t, d.ValidateTemplate(h.Template))
	})
	t.Run("HostCapacity", func(t *testing.T) {
		d := h.New(t, t.TempDir())
		hc := d.HostCapacity()
		assert.NoError(t, hc.Total.Validate("total"))
		assert.NoError(t, hc.Usable.Validate("usable"))
		assert.NoError(t, hc.Overbook.Validate("overbook"))
	})
	t.Run("Lifecycle", c.lifecycle)
	t.Run("Restart", c.restart)
	t.Run("Concurrent", c.concurrent)
	t.Run("CancelledContext", c.cancelled)
}

type checker struct{ h Harness }

// lifecycle: allocate -> running -> listed -> deallocate -> gone -> unlisted ->
// deallocate again is fine -> nothing left.
func (c *checker) lifecycle(t *testing.T) {
	d := c.h.New(t, t.TempDir())
	r := c.allocate(t, d, c.h.Meta)
	assert.NotEmpty(t, r.Driver, "resource names its driver instance")

	c.waitRunning(t, d, r)
	assert.Contains(t, c.listIDs(t, d), r.ID, "List holds the allocated resource")
	if c.h.CheckRunning != nil {
		c.h.CheckRunning(t, r)
	}

	require.NoError(t, d.Deallocate(t.Context(), &r))
	c.waitGone(t, d, r)
	assert.NotContains(t, c.listIDs(t, d), r.ID, "List drops the deallocated resource")
	require.NoError(t, d.Deallocate(t.Context(), &r), "deallocating a gone resource is not an error")
	_, err := d.Status(t.Context(), &r)
	assert.ErrorIs(t, err, drivers.ErrNotFound)
	if c.h.CheckGone != nil {
		c.h.CheckGone(t, r)
	}
}

// restart: a new driver on the same data dir lists what the first allocated and
// can deallocate it from what List returned, and a third one no longer sees it.
func (c *checker) restart(t *testing.T) {
	dir := t.TempDir()
	first := c.h.New(t, dir)
	r := c.allocate(t, first, c.h.Meta)
	c.waitRunning(t, first, r)

	second := c.h.New(t, dir)
	listed, err := second.List(t.Context())
	require.NoError(t, err)
	var found *types.Resource
	for i := range listed {
		if listed[i].ID == r.ID {
			found = &listed[i]
		}
	}
	require.NotNil(t, found, "a restarted driver lists %s", r.ID)
	c.deallocateLater(t, second, *found)
	phase, err := second.Status(t.Context(), found)
	require.NoError(t, err)
	assert.Equal(t, types.MachineRunning, phase)

	require.NoError(t, second.Deallocate(t.Context(), found))
	c.waitGone(t, second, *found)
	if c.h.CheckGone != nil {
		c.h.CheckGone(t, r)
	}
	third := c.h.New(t, dir)
	assert.NotContains(t, c.listIDs(t, third), r.ID, "a deallocation survives a restart")
}

// concurrent: N allocations at once get distinct ids and all deallocate.
func (c *checker) concurrent(t *testing.T) {
	d := c.h.New(t, t.TempDir())
	n := c.h.Concurrency
	res := make([]*types.Resource, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			meta := maps.Clone(c.h.Meta)
			meta["conformance-index"] = fmt.Sprint(i)
			res[i], errs[i] = d.Allocate(t.Context(), c.h.Template, meta)
		})
	}
	wg.Wait()
	for i := range n {
		if res[i] != nil {
			c.deallocateLater(t, d, *res[i])
		}
	}
	ids := map[string]bool{}
	for i := range n {
		require.NoError(t, errs[i], "allocation %d", i)
		require.NotNil(t, res[i], "allocation %d", i)
		require.False(t, ids[res[i].ID], "duplicate id %s", res[i].ID)
		ids[res[i].ID] = true
	}
	for _, r := range res {
		c.waitRunning(t, d, *r)
	}
	listed := c.listIDs(t, d)
	for id := range ids {
		assert.Contains(t, listed, id)
	}

	for i := range n {
		wg.Go(func() { errs[i] = d.Deallocate(t.Context(), res[i]) })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "deallocation %d", i)
	}
	for _, r := range res {
		c.waitGone(t, d, *r)
	}
	listed = c.listIDs(t, d)
	for id := range ids {
		assert.NotContains(t, listed, id)
	}
	if c.h.CheckGone != nil {
		for _, r := range res {
			c.h.CheckGone(t, *r)
		}
	}
}

// cancelled: Allocate with a cancelled context fails and leaves nothing behind.
func (c *checker) cancelled(t *testing.T) {
	d := c.h.New(t, t.TempDir())
	before := c.listIDs(t, d)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r, err := d.Allocate(ctx, c.h.Template, c.h.Meta)
	if r != nil {
		c.deallocateLater(t, d, *r)
	}
	require.Error(t, err, "allocate with a cancelled context")
	assert.Nil(t, r)
	assert.ElementsMatch(t, before, c.listIDs(t, d), "a cancelled allocation leaves nothing behind")
}

// allocate allocates one resource and makes sure it is released after the test.
func (c *checker) allocate(t *testing.T, d drivers.Driver, meta map[string]string) types.Resource {
	t.Helper()
	r, err := d.Allocate(t.Context(), c.h.Template, meta)
	require.NoError(t, err)
	require.NotNil(t, r)
	c.deallocateLater(t, d, *r)
	require.NotEmpty(t, r.ID)
	return *r
}

// deallocateLater releases r when the test ends, whatever happened; t.Context
// is already cancelled then, so it gets a context of its own.
func (c *checker) deallocateLater(t *testing.T, d drivers.Driver, r types.Resource) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.h.Timeout)
		defer cancel()
		if err := d.Deallocate(ctx, &r); err != nil {
			t.Errorf("cleanup: deallocate %s: %v", r.ID, err)
		}
	})
}

func (c *checker) waitRunning(t *testing.T, d drivers.Driver, r types.Resource) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		phase, err := d.Status(t.Context(), &r)
		require.NoError(ct, err)
		require.Equal(ct, types.MachineRunning, phase)
	}, c.h.Timeout, c.h.poll(), "resource %s becomes Running", r.ID)
	phase, err := d.Status(t.Context(), drivers.Bare(r))
	require.NoError(t, err, "Status finds a resource without its Info")
	assert.Equal(t, types.MachineRunning, phase, "and tells its phase")
}

func (c *checker) waitGone(t *testing.T, d drivers.Driver, r types.Resource) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		phase, err := d.Status(t.Context(), &r)
		require.Truef(ct, errors.Is(err, drivers.ErrNotFound), "status: phase %q, error %v", phase, err)
	}, c.h.Timeout, c.h.poll(), "resource %s is gone (ErrNotFound)", r.ID)
	_, err := d.Status(t.Context(), drivers.Bare(r))
	assert.ErrorIs(t, err, drivers.ErrNotFound, "a gone resource without its Info is gone too")
}

func (c *checker) listIDs(t *testing.T, d drivers.Driver) []string {
	t.Helper()
	list, err := d.List(t.Context())
	require.NoError(t, err)
	ids := make([]string, 0, len(list))
	for _, r := range list {
		ids = append(ids, r.ID)
	}
	return ids
}
