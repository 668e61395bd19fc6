package openapi

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Routes of joining: an admin makes a join token on any node, a new node
// presents it to fetch the cluster's secrets.
const (
	clusterJoinPath   = "/cluster/join"
	clusterTokensPath = "/cluster/join-tokens"
)

// JoinBundle is what a joining node receives: the cluster's CA (certificate
// and key, so it issues its own API certificate and can let others join in
// turn) and the gossip keys, the one in use first.
type JoinBundle struct {
	CACert     string   `json:"caCert"`
	CAKey      string   `json:"caKey"`
	GossipKeys []string `json:"gossipKeys,omitempty"`
}

// Joining is what the node gives the API to let others join.
type Joining struct {
	// Bundle returns the cluster's secrets.
	Bundle func() (JoinBundle, error)
	// Endpoint is this node's API URL (https://host:port), put into join
	// tokens; CAFingerprint pins the CA a joining node must see there.
	Endpoint      string
	CAFingerprint string
	// GossipAddress is this node's, for the printed command.
	GossipAddress string
}

// JoinTokenPrefix starts every join token.
const JoinTokenPrefix = "hfjoin1"

// FormatJoinToken makes the join token string: the prefix, the API URL to
// fetch from (base64url), the CA's SHA-256 (hex) and the bearer string.
func FormatJoinToken(endpoint, caFingerprint, bearer string) string {
	return strings.Join([]string{JoinTokenPrefix, base64.RawURLEncoding.EncodeToString([]byte(endpoint)), caFingerprint, bearer}, ".")
}

// ParseJoinToken splits a join token into its parts; the endpoint is an
// https URL.
func ParseJoinToken(t string) (endpoint, caFingerprint, bearer string, ok bool) {
	parts := strings.SplitN(strings.TrimSpace(t), ".", 5)
	if len(parts) != 5 || parts[0] != JoinTokenPrefix {
		return "", "", "", false
	}
	ep, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || len(parts[2]) != 64 {
		return "", "", "", false
	}
	// Only over TLS does the pin guard the bearer and the secrets: a token
	// naming a plain-HTTP (or any other) endpoint is not one this cluster made.
	if u, err := url.Parse(string(ep)); err != nil || u.Scheme != "https" || u.Host == "" {
		return "", "", "", false
	}
	if _, err := hex.DecodeString(parts[2]); err != nil {
		return "", "", "", false
	}
	return string(ep), parts[2], parts[3] + "." + parts[4], true
}

type joinTokenRequest struct {
	// TTL is how long the token works ("24h"; default 24h, at most 7 days).
	TTL string `json:"ttl,omitempty"`
}

// createJoinToken answers POST /api/v1/cluster/join-tokens (admin only): a
// new join token, shown once, with the command that joins a node with it.
func (s *Server) createJoinToken(c *gin.Context) {
	p := principal(c)
	if !p.IsAdmin() {
		s.writeErr(c, forbidden("", "role %s may not make join tokens", p.Role))
		return
	}
	j := s.cfg.Joining
	if j == nil || j.Bundle == nil || j.CAFingerprint == "" {
		s.writeErr(c, newErr(http.StatusServiceUnavailable, CodeUnavailable, "", "this node serves no joins (it has no cluster CA)"))
		return
	}
	body, err := readBody(c.Writer, c.Request, s.cfg.BodyTimeout)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	var req joinTokenRequest
	if len(strings.TrimSpace(string(body))) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			field := ""
			if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) {
				field = te.Field // {"ttl": 1}
			}
			s.writeErr(c, badRequest(field, "want {\"ttl\": \"24h\"}: %s", strings.TrimPrefix(err.Error(), "json: ")))
			return
		}
	}
	ttl := types.DefaultJoinTTL
	if req.TTL != "" {
		if ttl, err = time.ParseDuration(req.TTL); err != nil || ttl < types.MinJoinTTL || ttl > types.MaxJoinTTL {
			s.writeErr(c, badRequest("ttl", "must be a duration of at least %s and at most %s, got %q", types.MinJoinTTL, types.MaxJoinTTL, req.TTL))
			return
		}
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		s.writeErr(c, err)
		return
	}
	tok := &types.Token{Metadata: types.ObjectMeta{Name: "join-" + hex.EncodeToString(suffix)},
		Spec: types.TokenSpec{User: types.JoinUser, Role: types.RoleJoin, ExpiresAt: ceilSecond(s.cfg.Now().Add(ttl).UTC())}}
	types.SetKind(tok, types.KindToken)
	bearer, err := mintToken(tok)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	if _, err := s.st.Put(tok, store.PutOptions{Create: true}); err != nil {
		s.writeErr(c, err)
		return
	}
	token := FormatJoinToken(j.Endpoint, j.CAFingerprint, bearer)
	c.JSON(http.StatusCreated, gin.H{"name": tok.Metadata.Name, "token": token, "expiresAt": tok.Spec.ExpiresAt,
		"command": "hf-node --join " + j.GossipAddress + " --join-token " + token})
}

// join answers POST /api/v1/cluster/join for a join token (or an admin):
// the cluster's secrets.
func (s *Server) join(c *gin.Context) {
	p := principal(c)
	if p.Role != types.RoleJoin && !p.IsAdmin() {
		s.writeErr(c, forbidden("", "only a join token fetches the cluster's secrets"))
		return
	}
	j := s.cfg.Joining
	if j == nil || j.Bundle == nil {
		s.writeErr(c, newErr(http.StatusServiceUnavailable, CodeUnavailable, "", "this node serves no joins (it has no cluster CA)"))
		return
	}
	b, err := j.Bundle()
	if err != nil {
		s.writeErr(c, err)
		return
	}
	c.JSON(http.StatusOK, b)
}

// ceilSecond is t rounded up to the second: a token kept to the second
// works at least as long as it was asked for.
func ceilSecond(t time.Time) time.Time {
	if f := t.Truncate(time.Second); f.Before(t) {
		return f.Add(time.Second)
	}
	return t
}
