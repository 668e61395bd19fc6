package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"

	fastjson "github.com/goccy/go-json"

	"github.com/hf-fleet/hf/lib/types"
)

// NormalizeKind maps a kind name, its plural or their lower-case forms
// ("MachineClaim", "machineclaims", "machineclaim") to the kind name.
func NormalizeKind(kind string) (string, error) {
	if k, ok := types.KindForPlural(kind); ok {
		return k, nil
	}
	return "", fmt.Errorf("%w %q", ErrUnknownKind, kind)
}

// collection is the escaped path of a kind's collection.
func collection(kind string) string { return "/api/v1/" + types.Plural(kind) }

// item is the escaped path of one object.
func item(kind, name string) string { return collection(kind) + "/" + url.PathEscape(name) }

// Get returns the object kind/name.
func (c *Client) Get(ctx context.Context, kind, name string) (types.Object, error) {
	kind, err := NormalizeKind(kind)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := c.call(ctx, request{method: http.MethodGet, path: item(kind, name)}, &raw); err != nil {
		return nil, err
	}
	return DecodeObject(kind, raw)
}

// List returns the objects of kind whose labels carry every key=value of
// selector (all of them when selector is empty).
func (c *Client) List(ctx context.Context, kind string, selector map[string]string) ([]types.Object, error) {
	return c.ListSelected(ctx, kind, FormatSelector(selector))
}

// ListSelected returns the objects of kind that a label selector in
// Kubernetes' syntax selects ("tier!=gold,zone in (a,b)"; "" selects all).
func (c *Client) ListSelected(ctx context.Context, kind, selector string) ([]types.Object, error) {
	return c.ListFields(ctx, kind, selector, "")
}

// ListFields is ListSelected with a field selector as well
// ("spec.node=n1,status.phase!=Failed"; "" selects all): the server
// narrows the list, so a look at one node's machines does not fetch the
// fleet's.
func (c *Client) ListFields(ctx context.Context, kind, labelSelector, fieldSelector string) ([]types.Object, error) {
	kind, err := NormalizeKind(kind)
	if err != nil {
		return nil, err
	}
	query := url.Values{"limit": {strconv.Itoa(c.listPage())}}
	if labelSelector != "" {
		query.Set("labelSelector", labelSelector)
	}
	if fieldSelector != "" {
		query.Set("fieldSelector", fieldSelector)
	}
	var out []types.Object
	for {
		var page struct {
			Continue string            `json:"continue"`
			Items    []json.RawMessage `json:"items"`
		}
		if err := c.call(ctx, request{method: http.MethodGet, path: collection(kind), query: query}, &page); err != nil {
			return nil, err
		}
		for _, raw := range page.Items {
			o, err := DecodeObject(kind, raw)
			if err != nil {
				return nil, fmt.Errorf("list %s: item %d: %w", types.Plural(kind), len(out), err)
			}
			out = append(out, o)
		}
		if page.Continue == "" {
			return out, nil
		}
		query.Set("continue", page.Continue)
	}
}

// Create creates obj and returns it as the server stored it (with metadata
// version and times). An object whose kind field is empty is sent with the kind
// of its Go type.
func (c *Client) Create(ctx context.Context, obj types.Object) (types.Object, error) {
	kind, body, err := encodeObject(obj)
	if err != nil {
		return nil, err
	}
	return c.CreateRaw(ctx, kind, body)
}

// Submit creates obj as Create does, without decoding the object the
// server answers with: for a client that creates many objects and follows
// them otherwise (a watch), which would only throw the decoded copy away.
func (c *Client) Submit(ctx context.Context, obj types.Object) error {
	kind, body, err := encodeObject(obj)
	if err != nil {
		return err
	}
	if kind, err = NormalizeKind(kind); err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodPost, path: collection(kind), body: body}, nil)
}

// CreateOptions are the query parameters of a create, and of an update
// (UpdateWith).
type CreateOptions struct {
	// CapacityCheck says what the server does with a ScheduledEvent whose
	// required machines do not fit the cluster during its window: "refuse"
	// (the server's default: a conflict error), "warn" (written, with a
	// warning; see WithWarningHandler) or "off". An update is checked only
	// when it changes what the event needs or when. Other kinds ignore it.
	CapacityCheck string
}

func (o CreateOptions) query() url.Values {
	if o.CapacityCheck == "" {
		return nil
	}
	return url.Values{"capacityCheck": {o.CapacityCheck}}
}

// CreateRaw creates an object of kind from its JSON document, unchanged, so the
// server sees exactly what a user wrote (for `create -f`).
func (c *Client) CreateRaw(ctx context.Context, kind string, body []byte) (types.Object, error) {
	return c.CreateRawWith(ctx, kind, body, CreateOptions{})
}

// CreateRawWith is CreateRaw with the create's options.
func (c *Client) CreateRawWith(ctx context.Context, kind string, body []byte, opts CreateOptions) (types.Object, error) {
	kind, err := NormalizeKind(kind)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := c.call(ctx, request{method: http.MethodPost, path: collection(kind), query: opts.query(), body: body}, &raw); err != nil {
		return nil, err
	}
	return DecodeObject(kind, raw)
}

// Update replaces obj. When obj's metadata carries a version, it is sent as
// If-Match and the server refuses the write with a conflict if the object
// changed since.
func (c *Client) Update(ctx context.Context, obj types.Object) (types.Object, error) {
	return c.UpdateWith(ctx, obj, CreateOptions{})
}

// UpdateWith is Update with the write's options (CapacityCheck of a
// ScheduledEvent).
func (c *Client) UpdateWith(ctx context.Context, obj types.Object, opts CreateOptions) (types.Object, error) {
	kind, body, err := encodeObject(obj)
	if err != nil {
		return nil, err
	}
	name := obj.Meta().Name
	if name == "" {
		return nil, fmt.Errorf("update %s: metadata.name is empty", types.Plural(kind))
	}
	r := request{method: http.MethodPut, path: item(kind, name), query: opts.query(), body: body}
	if v := obj.Meta().Version; !v.IsZero() {
		r.header = http.Header{"If-Match": {v.String()}}
	}
	var raw json.RawMessage
	if err := c.call(ctx, r, &raw); err != nil {
		return nil, err
	}
	return DecodeObject(kind, raw)
}

// Delete deletes kind/name.
func (c *Client) Delete(ctx context.Context, kind, name string) error {
	return c.DeleteWith(ctx, kind, name, DeleteOptions{})
}

// DeleteOptions are the query parameters of a delete.
type DeleteOptions struct {
	// Force deletes a Node that is Up by its last report but that the
	// answering node cannot reach (it is gone for good). Other kinds
	// ignore it.
	Force bool
	// Cascade deletes a User's sessions and claims with it, once the node
	// that decides user deletes has found it would delete the user. Other
	// kinds ignore it.
	Cascade bool
}

// DeleteWith is Delete with the delete's options.
func (c *Client) DeleteWith(ctx context.Context, kind, name string, opts DeleteOptions) error {
	kind, err := NormalizeKind(kind)
	if err != nil {
		return err
	}
	q := url.Values{}
	if opts.Force {
		q.Set("force", "true")
	}
	if opts.Cascade {
		q.Set("cascade", "true")
	}
	return c.call(ctx, request{method: http.MethodDelete, path: item(kind, name), query: q}, nil)
}

// DecodeObject decodes one object of the JSON shape lib/types marshals. The
// document's own kind wins over kind, which is used when the document has none.
func DecodeObject(kind string, raw []byte) (types.Object, error) {
	if kind == "" {
		var peek struct {
			Kind string `json:"kind"`
		}
		if err := fastjson.Unmarshal(raw, &peek); err != nil {
			return nil, fmt.Errorf("decode object: %w", err)
		}
		kind = peek.Kind
	}
	obj, err := types.New(kind)
	if err != nil {
		return nil, fmt.Errorf("decode object: %w", err)
	}
	if err := fastjson.Unmarshal(raw, obj); err != nil {
		return nil, fmt.Errorf("decode %s: %w", kind, err)
	}
	if k := obj.GetKind(); k != "" && k != kind {
		// The document says it is another kind than the caller thought:
		// it is what it says.
		return DecodeObject(k, raw)
	}
	types.Upgrade(obj)
	if obj.GetKind() == "" {
		// The document said "kind": ""; keep the object self-describing.
		return DecodeObject(kind, withKind(raw, kind))
	}
	return obj, nil
}

// encodeObject marshals obj, filling in its kind from its Go type when the kind
// field is empty.
func encodeObject(obj types.Object) (string, []byte, error) {
	if obj == nil || reflect.ValueOf(obj).IsNil() {
		return "", nil, fmt.Errorf("encode object: nil object")
	}
	kind := obj.GetKind()
	if kind == "" {
		kind = reflect.TypeOf(obj).Elem().Name()
	}
	kind, err := NormalizeKind(kind)
	if err != nil {
		return "", nil, err
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return "", nil, fmt.Errorf("encode %s: %w", kind, err)
	}
	if obj.GetKind() == "" {
		body = withKind(body, kind)
	}
	return kind, body, nil
}

// withKind sets the top-level "kind" field of a JSON object document.
func withKind(doc []byte, kind string) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(doc, &m) != nil {
		return doc
	}
	k, _ := json.Marshal(kind)
	m["kind"] = k
	out, err := json.Marshal(m)
	if err != nil {
		return doc
	}
	return out
}

// FormatSelector renders a label selector as the API takes it: "k=v,k2=v2",
// sorted by key.
func FormatSelector(sel map[string]string) string {
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+sel[k])
	}
	return strings.Join(parts, ",")
}

// ParseSelector is the inverse of FormatSelector. Whitespace around items is
// ignored; an item without "=" is an error.
func ParseSelector(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("selector %q: want key=value", part)
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}

// CreateToken creates a token of a user and returns it with its bearer
// string, which the server shows only in this answer.
func (c *Client) CreateToken(ctx context.Context, tok *types.Token) (*types.Token, string, error) {
	kind, body, err := encodeObject(tok)
	if err != nil {
		return nil, "", err
	}
	var raw map[string]json.RawMessage
	if err := c.call(ctx, request{method: http.MethodPost, path: collection(kind), body: body}, &raw); err != nil {
		return nil, "", err
	}
	var bearer string
	if err := json.Unmarshal(raw["token"], &bearer); err != nil || bearer == "" {
		return nil, "", fmt.Errorf("create token: the answer holds no bearer token")
	}
	delete(raw, "token")
	rest, err := json.Marshal(raw)
	if err != nil {
		return nil, "", err
	}
	obj, err := DecodeObject(kind, rest)
	if err != nil {
		return nil, "", err
	}
	return obj.(*types.Token), bearer, nil
}

// MachineLogs copies the output of machine to w (GET
// /api/v1/machines/{name}/logs): the last tail lines (0: all) and, with
// follow, new output until the machine ends or ctx does.
func (c *Client) MachineLogs(ctx context.Context, machine string, tail int, follow bool, w io.Writer) error {
	q := url.Values{}
	if tail > 0 {
		q.Set("tail", strconv.Itoa(tail))
	}
	if follow {
		q.Set("follow", "true")
	}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: item(types.KindMachine, machine) + "/logs", query: q, accept: "text/plain"})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}
