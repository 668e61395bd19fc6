package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/hf-fleet/hf/lib/cluster/member"
	"github.com/hf-fleet/hf/lib/config"
	"github.com/hf-fleet/hf/lib/openapi"
	"github.com/hf-fleet/hf/lib/pki"
)

// SecretsDir is the directory under the data dir that holds the cluster's
// secrets: its CA, this node's API certificate and the gossip keys.
const SecretsDir = "cluster"

// gossipFile keeps the gossip keys (base64, the one in use first).
const gossipFile = "gossip.keys"

// secrets are the cluster secrets this node holds.
type secrets struct {
	dir string
	CA  *pki.CA
	// mu guards Keys once the node runs (a rotation changes them).
	mu sync.Mutex
	// Keys are the gossip keys, the one in use first; nil is plain gossip.
	Keys [][]byte
	// Made is set when this start made them (the first node of a cluster);
	// Joined when it fetched them with a join token.
	Made, Joined bool
	// Own is set when this node, joining with cluster.key set but without a
	// join token, made a CA of its own.
	Own bool
}

// loadSecrets finds this node's cluster secrets in its data dir; fetches
// them with a join token when it has none; or makes them, on the first node
// of a new cluster (one that joins no other). A node that joins others
// without a token or a configured key has no way to get them and says so.
func loadSecrets(ctx context.Context, cfg config.Config, joinToken string, log *slog.Logger) (*secrets, error) {
	s := &secrets{dir: filepath.Join(cfg.DataDir, SecretsDir)}
	ca, err := pki.LoadCA(s.dir)
	switch {
	case err == nil:
		s.CA = ca
		if joinToken != "" {
			log.Info("this node holds the cluster's secrets already; --join-token is not used")
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("cluster secrets in %s: %w", s.dir, err)
	case joinToken != "":
		b, err := fetchSecrets(ctx, joinToken)
		if err != nil {
			return nil, err
		}
		if s.CA, err = pki.ParseCA([]byte(b.CACert), []byte(b.CAKey)); err != nil {
			return nil, fmt.Errorf("join: the cluster sent a bad CA: %w", err)
		}
		for _, k := range b.GossipKeys {
			raw, err := base64.StdEncoding.DecodeString(k)
			if err != nil {
				return nil, fmt.Errorf("join: the cluster sent a bad gossip key: %w", err)
			}
			s.Keys = append(s.Keys, raw)
		}
		if err := s.save(); err != nil {
			return nil, err
		}
		s.Joined = true
	case len(cfg.Cluster.Join) == 0 || cfg.Cluster.Key != "":
		if s.CA, err = pki.NewCA(cfg.Cluster.Label, time.Now()); err != nil {
			return nil, err
		}
		if cfg.Cluster.Key == "" {
			key := make([]byte, 32)
			if _, err := rand.Read(key); err != nil {
				return nil, err
			}
			s.Keys = [][]byte{key}
		}
		if err := s.save(); err != nil {
			return nil, err
		}
		s.Made, s.Own = true, len(cfg.Cluster.Join) > 0
	default:
		return nil, fmt.Errorf("cluster.join is set but this node has no cluster secrets (%s): start it with --join-token, which `hf-cli cluster join-token` on any member prints", s.dir)
	}
	if cfg.Cluster.Key != "" {
		key, err := cfg.Cluster.KeyBytes()
		if err != nil {
			return nil, err
		}
		s.Keys = [][]byte{key} // the configured key wins
	} else if !s.Made && !s.Joined {
		if s.Keys, err = loadKeys(filepath.Join(s.dir, gossipFile)); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *secrets) save() error {
	if err := pki.SaveCA(s.dir, s.CA); err != nil {
		return fmt.Errorf("save cluster CA: %w", err)
	}
	return saveKeys(filepath.Join(s.dir, gossipFile), s.Keys)
}

// Bundle is what a joining node receives.
func (s *secrets) Bundle() (openapi.JoinBundle, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := openapi.JoinBundle{CACert: string(s.CA.CertPEM), CAKey: string(s.CA.KeyPEM)}
	for _, k := range s.Keys {
		b.GossipKeys = append(b.GossipKeys, base64.StdEncoding.EncodeToString(k))
	}
	return b, nil
}

func loadKeys(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("gossip keys: %w", err)
	}
	var enc []string
	if err := json.Unmarshal(data, &enc); err != nil {
		return nil, fmt.Errorf("gossip keys %s: %w", path, err)
	}
	var keys [][]byte
	for _, e := range enc {
		k, err := base64.StdEncoding.DecodeString(e)
		if err != nil {
			return nil, fmt.Errorf("gossip keys %s: %w", path, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func saveKeys(path string, keys [][]byte) error {
	enc := make([]string, 0, len(keys))
	for _, k := range keys {
		enc = append(enc, base64.StdEncoding.EncodeToString(k))
	}
	data, _ := json.Marshal(enc) // strings: cannot fail
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("save gossip keys: %w", err)
	}
	return os.Rename(tmp, path)
}

// fetchSecrets presents a join token to the node it names, over TLS whose
// CA must be the one the token pins.
func fetchSecrets(ctx context.Context, joinToken string) (openapi.JoinBundle, error) {
	endpoint, fp, bearer, ok := openapi.ParseJoinToken(joinToken)
	if !ok {
		return openapi.JoinBundle{}, errors.New("--join-token: not a join token (hfjoin1....; `hf-cli cluster join-token` prints one)")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The CA is not known yet: the chain is checked against the pin.
		InsecureSkipVerify: true, //nolint:gosec // verified below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			return verifyPinned(raw, fp)
		},
	}}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/api/v1/cluster/join", bytes.NewReader(nil))
	if err != nil {
		return openapi.JoinBundle{}, fmt.Errorf("join %s: %w", endpoint, err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return openapi.JoinBundle{}, fmt.Errorf("join %s: %w", endpoint, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode != http.StatusOK {
		var e openapi.ErrorBody
		_ = json.Unmarshal(body, &e)
		return openapi.JoinBundle{}, fmt.Errorf("join %s: %s: %s", endpoint, res.Status, e.Error.Message)
	}
	var b openapi.JoinBundle
	if err := json.Unmarshal(body, &b); err != nil {
		return openapi.JoinBundle{}, fmt.Errorf("join %s: %w", endpoint, err)
	}
	if ca, err := pki.ParseCA([]byte(b.CACert), []byte(b.CAKey)); err != nil || ca.Fingerprint() != fp {
		return openapi.JoinBundle{}, fmt.Errorf("join %s: the CA sent is not the one the token names", endpoint)
	}
	return b, nil
}

// verifyPinned checks that the server's chain holds the CA of fingerprint
// fp and that its leaf was signed by it.
func verifyPinned(raw [][]byte, fp string) error {
	if len(raw) == 0 {
		return errors.New("no certificate")
	}
	leaf, err := x509.ParseCertificate(raw[0])
	if err != nil {
		return err
	}
	for _, der := range raw[1:] {
		if pki.Fingerprint(der) != fp {
			continue
		}
		ca, err := x509.ParseCertificate(der)
		if err != nil {
			return err
		}
		if err := leaf.CheckSignatureFrom(ca); err != nil {
			return fmt.Errorf("server certificate not signed by the pinned CA: %w", err)
		}
		return nil
	}
	return fmt.Errorf("the server does not present the CA the join token pins (sha256 %s)", fp)
}

// serverTLS is the API's TLS config: this node's certificate from the
// cluster CA, sent with the CA so joining nodes can check their pin.
func (s *secrets) serverTLS(name string, hosts []string) (*tls.Config, error) {
	cert, err := pki.NodeCertificate(s.dir, s.CA, name, hosts, time.Now())
	if err != nil {
		return nil, err
	}
	cert.Certificate = append(cert.Certificate, s.CA.Cert.Raw)
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// nodeKeyring is the running member's keyring as the API rotates it; every
// change is saved to the gossip keys file, for the next start and for the
// join bundle.
type nodeKeyring struct {
	sec   *secrets
	mem   *member.Member
	fixed bool // cluster.key in the config
}

func (k *nodeKeyring) ring() (*memberlist.Keyring, error) {
	if k.fixed {
		return nil, openapi.ErrKeyringFixed
	}
	kr := k.mem.Keyring()
	if kr == nil {
		return nil, errors.New("gossip is not encrypted")
	}
	return kr, nil
}

func (k *nodeKeyring) Keys() [][]byte {
	if kr := k.mem.Keyring(); kr != nil {
		return kr.GetKeys()
	}
	return nil
}

func (k *nodeKeyring) change(op func(*memberlist.Keyring) error) error {
	kr, err := k.ring()
	if err != nil {
		return err
	}
	k.sec.mu.Lock()
	defer k.sec.mu.Unlock()
	if err := op(kr); err != nil {
		return err
	}
	k.sec.Keys = kr.GetKeys()
	return saveKeys(filepath.Join(k.sec.dir, gossipFile), k.sec.Keys)
}

func (k *nodeKeyring) Install(key []byte) error {
	return k.change(func(kr *memberlist.Keyring) error { return kr.AddKey(key) })
}

func (k *nodeKeyring) Use(key []byte) error {
	return k.change(func(kr *memberlist.Keyring) error { return kr.UseKey(key) })
}

func (k *nodeKeyring) Remove(key []byte) error {
	return k.change(func(kr *memberlist.Keyring) error { return kr.RemoveKey(key) })
}
