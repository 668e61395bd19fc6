package cloud

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/internal/syncbuf"
	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// bootPrefix starts the line both test doubles print first on a new instance.
const bootPrefix = "[    0.000000] Linux version "

// appendConsole adds text to the instance's console in the test double.
func (f *fixture) appendConsole(t *testing.T, id, text string) {
	t.Helper()
	f.printConsole(t, id, text, false)
}

// printConsole prints text on the instance's console in the test double;
// with replace, instead of all it printed before.
func (f *fixture) printConsole(t *testing.T, id, text string, replace bool) {
	t.Helper()
	var ok bool
	switch {
	case f.kind == TypeAWS && replace:
		ok = f.ec2.SetConsole(id, text)
	case f.kind == TypeAWS:
		ok = f.ec2.AppendConsole(id, text)
	case replace:
		ok = f.gce.SetConsole(id, text)
	default:
		ok = f.gce.AppendConsole(id, text)
	}
	require.True(t, ok, "instance %s in the test double", id)
}

func (f *fixture) kill(t *testing.T, id string) {
	t.Helper()
	if f.kind == TypeAWS {
		require.True(t, f.ec2.Kill(id))
	} else {
		require.True(t, f.gce.Kill(id))
	}
}

// consoleDriver is a prepared driver whose followed consoles are read
// every 10 ms, with one running instance.
func consoleDriver(t *testing.T, f *fixture) (*Driver, *types.Resource) {
	t.Helper()
	d := f.newDriver(t, "node-a", f.kind)
	d.consolePoll = 10 * time.Millisecond
	require.NoError(t, d.Prepare(t.Context(), f.config(nil)))
	t.Cleanup(func() { _ = d.Close() })
	r, err := d.Allocate(t.Context(), f.template("small", nil), testMeta)
	require.NoError(t, err)
	return d, r
}

func logs(t *testing.T, d *Driver, r *types.Resource, opts drivers.LogOptions) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, d.Logs(t.Context(), r, opts, &b))
	return b.String()
}

// TestLogsConsole: Logs is the VM's console output through the real SDKs
// (EC2's GetConsoleOutput, base64-decoded, asking for the latest; Compute's
// serial port 1), from the boot line on; Tail keeps the last lines.
func TestLogsConsole(t *testing.T) {
	forEachProvider(t, func(t *testing.T, f *fixture) {
		d, r := consoleDriver(t, f)
		release(t, d, r)
		f.appendConsole(t, r.ID, "cloud-init: one\ncloud-init: two\r\nlogin: ")

		all := logs(t, d, r, drivers.LogOptions{})
		assert.True(t, strings.HasPrefix(all, bootPrefix), "starts with the boot line: %q", all)
		assert.True(t, strings.HasSuffix(all, "\ncloud-init: one\ncloud-init: two\r\nlogin: "), all)
		assert.Equal(t, 4, strings.Count(all, "\n")+1, "four lines: %q", all)

		for _, tc := range []struct {
			tail int
			want string
		}{
			{1, "login: "},
			{2, "cloud-init: two\r\nlogin: "},
			{3, "cloud-init: one\ncloud-init: two\r\nlogin: "},
			{4, all},
			{100, all},
		} {
			t.Run(fmt.Sprint("tail ", tc.tail), func(t *testing.T) {
				assert.Equal(t, tc.want, logs(t, d, r, drivers.LogOptions{Tail: tc.tail}))
			})
		}
		if f.kind == TypeAWS {
			assert.Positive(t, f.ec2.Calls("GetConsoleOutput/Latest"), "asked for the latest output")
		} else {
			assert.Positive(t, f.gce.Calls("getSerialPortOutput"))
		}
	})
}

// TestLogsFollow: with Follow, Logs writes what the console prints after
// its first lines, once each, until ctx ends or the instance ends (deleted
// or dead: then its last lines are still written).
func TestLogsFollow(t *testing.T) {
	forEachProvider(t, func(t *testing.T, f *fixture) {
		for _, tc := range []struct {
			name string
			end  func(t *testing.T, d *Driver, r *types.Resource, cancel context.CancelFunc)
			last string // what the ending wrote last
		}{
			{name: "ctx ends", end: func(t *testing.T, _ *Driver, _ *types.Resource, cancel context.CancelFunc) { cancel() }},
			{name: "deallocated", end: func(t *testing.T, d *Driver, r *types.Resource, _ context.CancelFunc) {
				require.NoError(t, d.Deallocate(t.Context(), r))
			}},
			{name: "dies", last: "kernel panic\n", end: func(t *testing.T, _ *Driver, r *types.Resource, _ context.CancelFunc) {
				f.appendConsole(t, r.ID, "kernel panic\n")
				f.kill(t, r.ID)
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				d, r := consoleDriver(t, f)
				t.Cleanup(func() { _ = d.Deallocate(context.Background(), r) })
				boot := logs(t, d, r, drivers.LogOptions{})
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				var out syncbuf.Buffer
				done := make(chan error, 1)
				go func() { done <- d.Logs(ctx, r, drivers.LogOptions{Tail: 1, Follow: true}, &out) }()
				require.Eventually(t, func() bool { return out.String() == boot }, 10*time.Second, 5*time.Millisecond)

				f.appendConsole(t, r.ID, "hello\n")
				want := boot + "hello\n"
				require.Eventually(t, func() bool { return out.String() == want }, 10*time.Second, 5*time.Millisecond)
				f.appendConsole(t, r.ID, "again\n")
				want += "again\n"
				require.Eventually(t, func() bool { return out.String() == want }, 10*time.Second, 5*time.Millisecond)

				tc.end(t, d, r, cancel)
				select {
				case err := <-done:
					require.NoError(t, err)
				case <-time.After(30 * time.Second):
					t.Fatal("Logs kept following")
				}
				assert.Equal(t, want+tc.last, out.String(), "every line once")
			})
		}
	})
}

// TestLogsFollowSlidingWindow: a console longer than what the cloud keeps
// (EC2's last 64 KB, Compute's last 1 MB) is followed by what is new, not
// by the window again.
func TestLogsFollowSlidingWindow(t *testing.T) {
	forEachProvider(t, func(t *testing.T, f *fixture) {
		d, r := consoleDriver(t, f)
		release(t, d, r)
		var long strings.Builder
		for i := 0; long.Len() < 1<<20+1<<16; i++ {
			fmt.Fprintf(&long, "boot message %07d\n", i)
		}
		f.printConsole(t, r.ID, long.String(), true)
		ctx, cancel := context.WithCancel(t.Context())
		var out syncbuf.Buffer
		done := make(chan error, 1)
		go func() { done <- d.Logs(ctx, r, drivers.LogOptions{Tail: 1, Follow: true}, &out) }()
		require.Eventually(t, func() bool { return out.String() != "" }, 10*time.Second, 5*time.Millisecond)
		first := out.String()
		assert.True(t, strings.HasSuffix(long.String(), first), "the last line: %q", first)

		var more strings.Builder
		for i := range 50 {
			fmt.Fprintf(&more, "later %02d\n", i)
		}
		f.appendConsole(t, r.ID, more.String())
		require.Eventually(t, func() bool { return strings.HasSuffix(out.String(), "later 49\n") }, 10*time.Second, 5*time.Millisecond)
		cancel()
		require.NoError(t, <-done)
		assert.Equal(t, first+more.String(), out.String())
	})
}

// TestLogsNotFound: the console of another node's instance, or of one that
// is gone, is drivers.ErrNotFound; an unprepared driver reads none.
func TestLogsNotFound(t *testing.T) {
	forEachProvider(t, func(t *testing.T, f *fixture) {
		d, r := consoleDriver(t, f)
		other := f.driverOf(t, "node-b", f.kind, nil)
		var b strings.Builder
		assert.ErrorIs(t, other.Logs(t.Context(), r, drivers.LogOptions{}, &b), drivers.ErrNotFound)
		assert.ErrorIs(t, other.Logs(t.Context(), r, drivers.LogOptions{Follow: true}, &b), drivers.ErrNotFound)
		assert.Empty(t, b.String(), "nothing of node-a's console")

		require.NoError(t, d.Deallocate(t.Context(), r))
		assert.ErrorIs(t, d.Logs(t.Context(), r, drivers.LogOptions{}, &b), drivers.ErrNotFound)
		assert.ErrorIs(t, d.Logs(t.Context(), &types.Resource{}, drivers.LogOptions{}, &b), drivers.ErrNotFound)
		assert.Empty(t, b.String())

		assert.ErrorIs(t, f.newDriver(t, "node-a", f.kind).Logs(t.Context(), r, drivers.LogOptions{}, &b), drivers.ErrNotPrepared)
	})
}

func TestLastLines(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"a\nb\nc\n", 0, "a\nb\nc\n"},
		{"a\nb\nc\n", 1, "c\n"},
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc\n", 3, "a\nb\nc\n"},
		{"a\nb\nc\n", 9, "a\nb\nc\n"},
		{"a\nb\nc", 1, "c"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\n\n", 1, "\n"},
		{"", 3, ""},
		{"\n", 1, "\n"},
	} {
		t.Run(fmt.Sprintf("%q/%d", tc.s, tc.n), func(t *testing.T) {
			assert.Equal(t, tc.want, lastLines(tc.s, tc.n))
		})
	}
}

func TestUnseen(t *testing.T) {
	for _, tc := range []struct {
		name, prev, cur, want string
	}{
		{"nothing new", "a\nb\n", "a\nb\n", ""},
		{"grown", "a\nb\n", "a\nb\nc\n", "c\n"},
		{"from nothing", "", "a\n", "a\n"},
		{"window slid", "1\n2\n3\n", "2\n3\n4\n", "4\n"},
		{"window slid, nothing new", "1\n2\n3\n", "2\n3\n", ""},
		{"window slid past all", "1\n2\n", "3\n4\n", "3\n4\n"},
		{"longest overlap", "xaxa", "xaxab", "b"},
		{"overlap inside a repeat", "abab", "ababab", "ab"},
		{"emptied", "a\n", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, unseen(tc.prev, tc.cur))
		})
	}
}
