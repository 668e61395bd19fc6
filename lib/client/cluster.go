package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/hf-fleet/hf/lib/types"
)

// Health returns nil when GET /healthz answers 2xx: the process is up.
func (c *Client) Health(ctx context.Context) error {
	return c.call(ctx, request{method: http.MethodGet, path: "/healthz", noToken: true}, nil)
}

// Ready returns nil when GET /readyz answers 2xx: the node serves requests.
func (c *Client) Ready(ctx context.Context) error {
	return c.call(ctx, request{method: http.MethodGet, path: "/readyz", noToken: true}, nil)
}

// WhoAmI returns the server's description of the caller (GET /api/v1/whoami) as
// a JSON object.
func (c *Client) WhoAmI(ctx context.Context) (map[string]any, error) {
	var out map[string]any
	if err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/whoami"}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Drain stops new placements on node name (POST /api/v1/nodes/{name}/drain). It
// returns the node when the server answers with it, else nil.
func (c *Client) Drain(ctx context.Context, name string) (*types.Node, error) {
	return c.nodeAction(ctx, name, "drain")
}

// Undrain lets node name take new placements again (POST .../undrain). It
// returns the node when the server answers with it, else nil.
func (c *Client) Undrain(ctx context.Context, name string) (*types.Node, error) {
	return c.nodeAction(ctx, name, "undrain")
}

func (c *Client) nodeAction(ctx context.Context, name, action string) (*types.Node, error) {
	path := collection(types.KindNode) + "/" + url.PathEscape(name) + "/" + action
	resp, err := c.send(ctx, request{method: http.MethodPost, path: path})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("post %s: read response: %w", path, err)
	}
	// An empty body or one that is not a node is a valid answer to an action.
	if obj, err := DecodeObject(types.KindNode, raw); err == nil {
		if n, ok := obj.(*types.Node); ok {
			return n, nil
		}
	}
	return nil, nil
}
