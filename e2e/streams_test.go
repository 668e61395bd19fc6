package e2e

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/types"
)

// TestUnreadStreamsKeepMemoryBounded is the exhaustion finding of the
// security issue on a real process: 200 watch streams whose clients never
// read while 6 MiB of changes pour in do not grow the node without bound
// (it grew from 43 to 437 MB before streams got a write deadline); the
// streams are dropped and the node serves on.
func TestUnreadStreamsKeepMemoryBounded(t *testing.T) {
	n := startWithConfig(t, "", "api:\n  max_streams_per_token: 250\n")
	pid := n.cmd.Process.Pid
	before := rssMB(t, pid)
	u, err := url.Parse(n.API)
	require.NoError(t, err)
	tlsCfg := n.tlsConfig()
	var conns []*tls.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range 200 {
		c, err := tls.Dial("tcp", u.Host, tlsCfg)
		require.NoError(t, err)
		_, err = fmt.Fprintf(c, "GET /api/v1/machinetemplates?watch=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", n.Token)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	cl, err := client.New(n.API, n.Token, client.WithHTTPClient(n.httpClient()))
	require.NoError(t, err)
	pad := strings.Repeat("x", 16<<10)
	peak := before
	for i := range 400 {
		_, err := cl.CreateRaw(t.Context(), types.KindMachineTemplate, []byte(fmt.Sprintf(
			`{"kind":"MachineTemplate","metadata":{"name":"t-%03d","annotations":{"pad":%q}},"spec":{"providerConfiguration":{"test":{}}}}`, i, pad)))
		require.NoError(t, err)
		if i%50 == 0 {
			peak = max(peak, rssMB(t, pid))
		}
	}
	require.Eventually(t, func() bool {
		peak = max(peak, rssMB(t, pid))
		out, err := n.run("whoami")
		return err == nil && strings.Contains(out, "admin")
	}, 30*time.Second, 200*time.Millisecond, "the node serves on")
	// The streams that never read are dropped after their write deadline.
	streams := func() string {
		for _, l := range strings.Split(httpGet(t, n.httpClient(), n.API+"/metrics"), "\n") {
			if strings.HasPrefix(l, "http_event_streams ") {
				return strings.TrimPrefix(l, "http_event_streams ")
			}
		}
		return "?"
	}
	assert.NotEqual(t, "0", streams(), "the streams were open")
	require.Eventually(t, func() bool { return streams() == "0" }, 60*time.Second, 500*time.Millisecond,
		"every stream whose client stopped reading is dropped")
	after := rssMB(t, pid)
	t.Logf("RSS: %.0f MB before, peak %.0f MB with 200 unread streams and 6 MiB of events, %.0f MB after", before, peak, after)
	assert.Less(t, peak, before+200, "RSS stays bounded (200 streams x 6 MiB would be 1.2 GB buffered)")
}
