package cmd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tlsNode is an API over TLS answering whoami, and the PEM of its
// certificate (its own CA, as httptest makes it).
func tlsNode(t *testing.T) (url string, caPEM []byte) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"user": "alice", "role": "user", "token": "laptop"})
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the test's
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// otherCA is the PEM of a CA that signed nothing here (httptest's servers
// all share one certificate, so it is made here).
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another cluster CA"},
		NotBefore: time.Unix(0, 0), NotAfter: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// An endpoint given with --endpoint and --token is checked against the
// current profile's CA (it is most often another node of the profile's
// cluster), and one on this host also against the CA of the node here.
func TestEndpointFlagTrustsTheProfilesCA(t *testing.T) {
	url, ca := tlsNode(t)
	c := newCLI(t)
	delete(c.env, "HF_ENDPOINT")
	delete(c.env, "HF_TOKEN")
	profile := func(ca []byte) {
		require.NoError(t, saveConfig(filepath.Join(c.env["HF_CONFIG_DIR"], "config.yaml"), &Config{Current: "lab",
			Profiles: map[string]*Profile{"lab": {Endpoint: "https://node-1.lab:7700", Token: "t", CA: string(ca)}}}))
	}

	profile(ca)
	r := c.run("--endpoint", url, "--token", "other", "whoami")
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.out, "alice")

	// The profile is of another cluster; the node on this host signs the
	// endpoint's certificate.
	profile(otherCA(t))
	r = c.run("--endpoint", url, "--token", "other", "whoami")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.err, "certificate")
	c.localCA = func() ([]byte, error) { return ca, nil }
	r = c.run("--endpoint", url, "--token", "other", "whoami")
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.out, "alice")

	// --ca-file is the only CA when given.
	other := filepath.Join(t.TempDir(), "other.pem")
	require.NoError(t, os.WriteFile(other, otherCA(t), 0o600))
	r = c.run("--endpoint", url, "--token", "other", "--ca-file", other, "whoami")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.err, "certificate")
}

func TestTrustedCAs(t *testing.T) {
	local := func() ([]byte, error) { return []byte("LOCAL"), nil }
	assert.Nil(t, trustedCAs("", nil, "https://127.0.0.1:7700"))
	assert.Equal(t, "PROFILE", string(trustedCAs("PROFILE", local, "https://10.0.0.5:7700")), "not this host: the node here does not count")
	assert.Equal(t, "PROFILE\nLOCAL", string(trustedCAs("PROFILE", local, "https://127.0.0.1:7700")))
	assert.Equal(t, "LOCAL", string(trustedCAs("", local, "https://localhost:7700")))
	// Both parse as one pool.
	_, a := tlsNode(t)
	b := otherCA(t)
	both, err := x509.ParseCertificate(pemBlock(t, b))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(trustedCAs(string(a), func() ([]byte, error) { return b, nil }, "https://127.0.0.1:1")))
	_, err = both.Verify(x509.VerifyOptions{Roots: pool})
	assert.NoError(t, err, "the second CA is in the pool")
}

// pemBlock is the DER of the first PEM block of b.
func pemBlock(t *testing.T, b []byte) []byte {
	t.Helper()
	blk, _ := pem.Decode(b)
	require.NotNil(t, blk)
	return blk.Bytes
}
