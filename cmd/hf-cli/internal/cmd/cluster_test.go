package cmd

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A --ttl out of the range the API takes is a usage error (exit 2) that
// names the flag and the range, and no request is sent: it was sent, and
// the server's 400 made hf-cli exit 1 ("bad_request: ttl: must be a
// duration above 0 and at most 168h0m0s").
func TestJoinTokenTTLOutOfRange(t *testing.T) {
	for _, ttl := range []string{"10000h", "168h0m1s", "-1s", "500ms"} {
		t.Run(ttl, func(t *testing.T) {
			c := newCLI(t)
			r := c.run("cluster", "join-token", "--ttl", ttl)
			assert.Equal(t, ExitUsage, r.code, r.err)
			assert.Contains(t, r.err, "hf-cli: --ttl must be from 1s to 168h (0, or left out: the default 24h), got ")
			assert.Empty(t, r.out)
			assert.Empty(t, c.srv.Requests(), "nothing reaches the server")
		})
	}
}
