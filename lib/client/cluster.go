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
	return action[*types.Node](ctx, c, types.KindNode, name, "drain")
}

// Undrain lets node name take new placements again (POST .../undrain). It
// returns the node when the server answers with it, else nil.
func (c *Client) Undrain(ctx context.Context, name string) (*types.Node, error) {
	return action[*types.Node](ctx, c, types.KindNode, name, "undrain")
}

// Keepalive says session name is still in use (POST
// /api/v1/sessions/{name}/keepalive); a Paused session becomes Active again.
// It returns the session when the server answers with it, else nil.
func (c *Client) Keepalive(ctx context.Context, name string) (*types.Session, error) {
	return action[*types.Session](ctx, c, types.KindSession, name, "keepalive")
}

// action posts to an object's action endpoint (.../{name}/{verb}) and
// returns the object when the server answers with one of kind, else nil.
func action[T types.Object](ctx context.Context, c *Client, kind, name, verb string) (T, error) {
	var zero T
	path := collection(kind) + "/" + url.PathEscape(name) + "/" + verb
	resp, err := c.send(ctx, request{method: http.MethodPost, path: path})
	if err != nil {
		return zero, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return zero, fmt.Errorf("post %s: read response: %w", path, err)
	}
	// An empty body or one that is not such an object is a valid answer.
	if obj, err := DecodeObject(kind, raw); err == nil {
		if o, ok := obj.(T); ok {
			return o, nil
		}
	}
	return zero, nil
}
