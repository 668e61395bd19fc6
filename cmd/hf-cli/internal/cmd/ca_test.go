package cmd

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/pki"
)

// clusterCA makes a cluster CA as a first node does.
func clusterCA(t *testing.T) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA("test", time.Now())
	require.NoError(t, err)
	return ca
}

// tlsNode is an API answering whoami over TLS with a node certificate
// issued by ca for 127.0.0.1.
func tlsNode(t *testing.T, ca *pki.CA) string {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue("n1", []string{"127.0.0.1"}, time.Now())
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"user": "alice", "role": "user", "token": "laptop"})
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the test's
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL
}

// An endpoint given with --endpoint and --token is checked against the
// current profile's CA (it is most often another node of the profile's
// cluster), and one on this host also against the CA of the node here.
func TestEndpointFlagTrustsTheProfilesCA(t *testing.T) {
	ca, other := clusterCA(t), clusterCA(t)
	url := tlsNode(t, ca)
	c := newCLI(t)
	delete(c.env, "HF_ENDPOINT")
	delete(c.env, "HF_TOKEN")
	profile := func(ca []byte) {
		require.NoError(t, saveConfig(filepath.Join(c.env["HF_CONFIG_DIR"], "config.yaml"), &Config{Current: "lab",
			Profiles: map[string]*Profile{"lab": {Endpoint: "https://node-1.lab:7700", Token: "t", CA: string(ca)}}}))
	}

	profile(ca.CertPEM)
	r := c.run("--endpoint", url, "--token", "other", "whoami")
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.out, "alice")

	// The profile is of another cluster; the node on this host signs the
	// endpoint's certificate.
	profile(other.CertPEM)
	r = c.run("--endpoint", url, "--token", "other", "whoami")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.err, "certificate")
	c.localCA = func() ([]byte, error) { return ca.CertPEM, nil }
	r = c.run("--endpoint", url, "--token", "other", "whoami")
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.out, "alice")

	// --ca-file is the only CA when given.
	file := filepath.Join(t.TempDir(), "other.pem")
	require.NoError(t, os.WriteFile(file, other.CertPEM, 0o600))
	r = c.run("--endpoint", url, "--token", "other", "--ca-file", file, "whoami")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.err, "certificate")
}

// A profile named by --profile is a flag, so its CA beats HF_CA_FILE as its
// endpoint and token beat HF_ENDPOINT and HF_TOKEN: with HF_CA_FILE set for
// one cluster, --profile of another took the profile's endpoint and token
// and checked them against the other cluster's CA.
func TestProfileFlagBeatsCAFileEnv(t *testing.T) {
	ca, other := clusterCA(t), clusterCA(t)
	url := tlsNode(t, ca)
	c := newCLI(t)
	file := filepath.Join(t.TempDir(), "other.pem")
	require.NoError(t, os.WriteFile(file, other.CertPEM, 0o600))
	c.env["HF_CA_FILE"] = file
	require.NoError(t, saveConfig(filepath.Join(c.env["HF_CONFIG_DIR"], "config.yaml"), &Config{
		Profiles: map[string]*Profile{"lab": {Endpoint: url, Token: "t", CA: string(ca.CertPEM)}}}))

	r := c.run("--profile", "lab", "whoami")
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.out, "alice")

	// Picked by HF_PROFILE it yields to the environment, CA and all.
	c.env["HF_PROFILE"] = "lab"
	delete(c.env, "HF_ENDPOINT")
	delete(c.env, "HF_TOKEN")
	r = c.run("whoami")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.err, "certificate")
	// And --ca-file beats --profile.
	r = c.run("--profile", "lab", "--ca-file", file, "whoami")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.err, "certificate")
}

func TestTrustedCAs(t *testing.T) {
	local := func() ([]byte, error) { return []byte("LOCAL"), nil }
	assert.Nil(t, trustedCAs("", nil, "https://127.0.0.1:7700"))
	assert.Equal(t, "PROFILE", string(trustedCAs("PROFILE", local, "https://10.0.0.5:7700")), "not this host: the node here does not count")
	assert.Equal(t, "PROFILE\nLOCAL", string(trustedCAs("PROFILE", local, "https://127.0.0.1:7700")))
	assert.Equal(t, "LOCAL", string(trustedCAs("", local, "https://localhost:7700")))

	// Both parse as one pool: a certificate of the second CA verifies.
	a, b := clusterCA(t), clusterCA(t)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(trustedCAs(string(a.CertPEM), func() ([]byte, error) { return b.CertPEM, nil }, "https://127.0.0.1:1")))
	_, err := b.Cert.Verify(x509.VerifyOptions{Roots: pool})
	assert.NoError(t, err, "the second CA is in the pool")
}
