package e2e

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readyz returns the status code and body of p's /readyz.
func readyz(p *proc) (int, string, error) {
	res, err := p.httpClient().Get(p.API + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// TestReadyAfterJoin: a node told to join is not ready (/readyz 503, saying
// whom it waits for) while no member answers, and becomes ready when one
// does; the first node of a cluster is ready on its own.
func TestReadyAfterJoin(t *testing.T) {
	const cfg = "cluster: {rejoin_interval: 300ms}\n"
	n1 := startWithConfig(t, "", cfg)
	n2 := startWithConfig(t, "", cfg, "--join", n1.Gossip)
	for _, p := range []*proc{n1, n2} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			code, body, err := readyz(p)
			assert.NoError(c, err)
			assert.Equal(c, http.StatusOK, code, body)
		}, 15*time.Second, 50*time.Millisecond)
	}

	// Both down; the joined one comes back alone: its data dir has the
	// cluster's secrets, so it starts, but it is not part of the cluster.
	n2.stop()
	n1.stop()
	n2 = n2.restart()
	code, body, err := readyz(n2)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "not joined: no member at "+n1.Gossip)
	_, _, exit := n2.cli(t.Context(), nil, "cluster", "health")
	assert.NotEqual(t, 0, exit, "hf-cli cluster health says it is not ready")

	n1 = n1.restart()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, body, err := readyz(n2)
		assert.NoError(c, err)
		assert.Equal(c, http.StatusOK, code, body)
	}, 15*time.Second, 50*time.Millisecond, "ready once its rejoin reaches the first node")
}
