package openapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/hf-fleet/hf/lib/pki"
)

const clusterKeysPath = "/cluster/gossip-keys"

// Keyring is the node's gossip keyring, as the API changes it during a key
// rotation: every node installs the new key, then every node uses it, then
// every node removes the old one (hf-cli cluster rotate-key does the three
// steps on all nodes).
type Keyring interface {
	// Keys are the installed keys, the one in use first.
	Keys() [][]byte
	Install(key []byte) error
	Use(key []byte) error
	Remove(key []byte) error
}

// retire removes every key of kr but key, which must be the one in use.
func retire(kr Keyring, key []byte) error {
	keys := kr.Keys()
	if len(keys) == 0 || !bytes.Equal(keys[0], key) {
		return errors.New("retire: the key given is not the one in use (use it first)")
	}
	for _, k := range keys[1:] {
		if err := kr.Remove(k); err != nil {
			return err
		}
	}
	return nil
}

// ErrKeyringFixed is returned by a Keyring whose key is set in the node's
// config: rotate it there.
var ErrKeyringFixed = errors.New("this node's gossip key is set by cluster.key in its config: change it there")

// gossipKeysBody is the answer of the gossip-key routes.
type gossipKeysBody struct {
	Node    string   `json:"node"`
	Primary string   `json:"primary"`
	Keys    []string `json:"keys"`
}

func (s *Server) gossipKeys() (gossipKeysBody, error) {
	keys := s.cfg.Keyring.Keys()
	b := gossipKeysBody{Node: s.cfg.NodeName, Keys: []string{}}
	for i, k := range keys {
		if i == 0 {
			b.Primary = pki.KeyID(k)
		}
		b.Keys = append(b.Keys, pki.KeyID(k))
	}
	return b, nil
}

// listGossipKeys answers GET /api/v1/cluster/gossip-keys: this node's keys
// by ID, the one in use first. Admin only.
func (s *Server) listGossipKeys(c *gin.Context) {
	if !s.keyringAllowed(c) {
		return
	}
	b, err := s.gossipKeys()
	if err != nil {
		s.writeErr(c, err)
		return
	}
	c.JSON(http.StatusOK, b)
}

type gossipKeyRequest struct {
	Action string `json:"action"`
	Key    string `json:"key"`
}

// changeGossipKeys answers POST /api/v1/cluster/gossip-keys with
// {"action": "install"|"use"|"remove"|"retire", "key": base64}; retire
// removes every key but the given one, which must be in use. Admin only.
func (s *Server) changeGossipKeys(c *gin.Context) {
	if !s.keyringAllowed(c) {
		return
	}
	body, err := readBody(c.Writer, c.Request, s.cfg.BodyTimeout)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	var req gossipKeyRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		s.writeErr(c, badRequest("", "want {\"action\": \"install\", \"key\": \"<base64>\"}: %s", strings.TrimPrefix(err.Error(), "json: ")))
		return
	}
	key, err := base64.StdEncoding.DecodeString(req.Key)
	if err != nil || (len(key) != 16 && len(key) != 24 && len(key) != 32) {
		s.writeErr(c, badRequest("key", "must be base64 of 16, 24 or 32 bytes"))
		return
	}
	kr := s.cfg.Keyring
	switch req.Action {
	case "install":
		err = kr.Install(key)
	case "use":
		err = kr.Use(key)
	case "remove":
		err = kr.Remove(key)
	case "retire":
		err = retire(kr, key)
	default:
		s.writeErr(c, badRequest("action", "must be install, use, remove or retire, got %q", req.Action))
		return
	}
	if errors.Is(err, ErrKeyringFixed) {
		s.writeErr(c, newErr(http.StatusConflict, CodeConflict, "", "%v", err))
		return
	}
	if err != nil {
		s.writeErr(c, badRequest("key", "%v", err))
		return
	}
	s.log.Info("gossip keyring changed", "action", req.Action, "key", pki.KeyID(key))
	b, err := s.gossipKeys()
	if err != nil {
		s.writeErr(c, err)
		return
	}
	c.JSON(http.StatusOK, b)
}

func (s *Server) keyringAllowed(c *gin.Context) bool {
	p := principal(c)
	if !p.IsAdmin() {
		s.writeErr(c, forbidden("", "role %s may not touch the gossip keys", p.Role))
		return false
	}
	if s.cfg.Keyring == nil {
		s.writeErr(c, newErr(http.StatusServiceUnavailable, CodeUnavailable, "", "this node's gossip is not encrypted"))
		return false
	}
	return true
}
