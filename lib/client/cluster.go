package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

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
	return as[*types.Node](c.Action(ctx, types.KindNode, name, "drain"))
}

// Undrain lets node name take new placements again (POST .../undrain). It
// returns the node when the server answers with it, else nil.
func (c *Client) Undrain(ctx context.Context, name string) (*types.Node, error) {
	return as[*types.Node](c.Action(ctx, types.KindNode, name, "undrain"))
}

// Action posts to the action endpoint verb of kind/name (POST
// .../{name}/{verb}) and returns the object the server answers with, or nil
// when it answers without one of kind (an empty body is a valid answer).
func (c *Client) Action(ctx context.Context, kind, name, verb string) (types.Object, error) {
	path := collection(kind) + "/" + url.PathEscape(name) + "/" + verb
	resp, err := c.send(ctx, request{method: http.MethodPost, path: path})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("post %s: read response: %w", path, err)
	}
	if obj, err := DecodeObject(kind, raw); err == nil {
		return obj, nil
	}
	return nil, nil
}

// as narrows an Action's answer to its Go type (nil when there was none).
func as[T types.Object](o types.Object, err error) (T, error) {
	t, _ := o.(T)
	return t, err
}

// Audit returns the node's record of writes through its API (GET
// /api/v1/audit, admin only), oldest first; q may hold user, kind, name,
// since and limit.
func (c *Client) Audit(ctx context.Context, q url.Values) ([]types.AuditRecord, error) {
	var out struct {
		Items []types.AuditRecord `json:"items"`
	}
	if err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/audit", query: q}, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// JoinToken is a new join token, as POST /api/v1/cluster/join-tokens
// answers it.
type JoinToken struct {
	Name      string    `json:"name"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
	Command   string    `json:"command"`
}

// CreateJoinToken makes a join token that works for ttl (0: the server's
// default, 24h). Admin only.
func (c *Client) CreateJoinToken(ctx context.Context, ttl time.Duration) (*JoinToken, error) {
	body := []byte("{}")
	if ttl > 0 {
		body = []byte(fmt.Sprintf(`{"ttl": %q}`, ttl.String()))
	}
	var out JoinToken
	if err := c.call(ctx, request{method: http.MethodPost, path: "/api/v1/cluster/join-tokens", body: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GossipKeys is a node's gossip keyring by key ID, the one in use first.
type GossipKeys struct {
	Node    string   `json:"node"`
	Primary string   `json:"primary"`
	Keys    []string `json:"keys"`
}

// GossipKeys returns the node's gossip keys by ID (admin only).
func (c *Client) GossipKeys(ctx context.Context) (*GossipKeys, error) {
	var out GossipKeys
	if err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/cluster/gossip-keys"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ChangeGossipKey installs, uses or removes key (base64) on the node
// (admin only) and returns its keyring after.
func (c *Client) ChangeGossipKey(ctx context.Context, action, key string) (*GossipKeys, error) {
	body, err := json.Marshal(map[string]string{"action": action, "key": key})
	if err != nil {
		return nil, err
	}
	var out GossipKeys
	if err := c.call(ctx, request{method: http.MethodPost, path: "/api/v1/cluster/gossip-keys", body: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
