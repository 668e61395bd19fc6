// Package client is a small Go client for hf's REST API, used by hf-cli, tests
// and benchmarks. It speaks the JSON shapes of lib/types and turns error
// responses into *APIError values callers can branch on with IsNotFound,
// IsConflict and friends.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	fastjson "github.com/goccy/go-json"
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 1 << 20

// Client calls one hf API endpoint with one bearer token. It is safe for
// concurrent use.
type Client struct {
	base      *url.URL
	token     string
	http      *http.Client
	userAgent string
	page      int          // objects per list request (0: DefaultListPage)
	warn      func(string) // WithWarningHandler (nil: warnings dropped)
}

// DefaultListPage is how many objects List asks for per request; it follows
// the server's continue tokens until it has them all.
const DefaultListPage = 500

// WithListPage sets how many objects List asks for per request.
func WithListPage(n int) Option { return func(c *Client) { c.page = n } }

func (c *Client) listPage() int {
	if c.page > 0 {
		return c.page
	}
	return DefaultListPage
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests through hc (timeouts, TLS,
// test transports). A Timeout on hc also cuts Watch streams.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithWarningHandler has fn called with the text of each warning (the
// Warning header, `199 hf "text"`) of a successful response, e.g. a
// ScheduledEvent created over capacity with CreateOptions.CapacityCheck
// "warn". fn may be called from several goroutines at once.
func WithWarningHandler(fn func(text string)) Option { return func(c *Client) { c.warn = fn } }

// New returns a client for endpoint ("http://host:port", optionally with a path
// prefix) that sends token as a bearer token on every /api call.
func New(endpoint, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(endpoint))
	if err != nil {
		return nil, fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("endpoint %q: scheme must be http or https", endpoint)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("endpoint %q: no host", endpoint)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	c := &Client{base: u, token: token, http: http.DefaultClient, userAgent: "hf-client"}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Endpoint returns the base URL the client talks to.
func (c *Client) Endpoint() string { return c.base.String() }

// request is one API call.
type request struct {
	method  string
	path    string // below the base URL, escaped, starting with "/"
	query   url.Values
	body    []byte
	header  http.Header
	accept  string
	noToken bool
}

// send performs r and returns the response when its status is 2xx; any other
// status is read and returned as an *APIError. The caller closes the body.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	target := c.base.String() + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", strings.ToLower(r.method), r.path, err)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	accept := r.accept
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Accept", accept)
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if c.token != "" && !r.noToken {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", strings.ToLower(r.method), r.path, unwrapURLError(err))
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if c.warn != nil {
			for _, v := range resp.Header.Values("Warning") {
				c.warn(warningText(v))
			}
		}
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, readAPIError(resp)
}

// warningText is the text of a Warning header value (RFC 9111: code, agent,
// quoted text, optional date), the whole value when it is not of that form.
func warningText(v string) string {
	_, rest, ok := strings.Cut(v, " ")
	if ok {
		_, rest, ok = strings.Cut(rest, " ")
	}
	if !ok || !strings.HasPrefix(rest, `"`) {
		return v
	}
	var b strings.Builder
	for i := 1; i < len(rest); i++ {
		switch rest[i] {
		case '"':
			return b.String()
		case '\\':
			if i++; i < len(rest) {
				b.WriteByte(rest[i])
			}
		default:
			b.WriteByte(rest[i])
		}
	}
	return v // no closing quote
}

// unwrapURLError drops *url.Error's `Get "http://..."` prefix: send already says
// what was called, and the wrapped error keeps errors.Is working.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// readAPIError turns an error response into an *APIError, tolerating bodies that
// are not the API's JSON (proxies, load balancers).
func readAPIError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	}
	e := &APIError{Status: resp.StatusCode}
	if json.Unmarshal(raw, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message, e.Field = body.Error.Code, body.Error.Message, body.Error.Field
		return e
	}
	e.Code = codeForStatus(resp.StatusCode)
	msg := strings.TrimSpace(string(raw))
	if len(msg) > 200 || strings.ContainsAny(msg, "\n<") {
		msg = ""
	}
	if msg == "" {
		msg = strings.ToLower(http.StatusText(resp.StatusCode))
	}
	e.Message = msg
	return e
}

// call performs r and decodes a JSON response body into out (when out is not nil).
func (c *Client) call(ctx context.Context, r request, out any) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := fastjson.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", strings.ToLower(r.method), r.path, err)
	}
	return nil
}
