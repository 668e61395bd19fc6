package pki

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var day0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestCARoundTripAndFiles(t *testing.T) {
	ca, err := NewCA("lab", day0)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "cluster")
	require.NoError(t, SaveCA(dir, ca))
	back, err := LoadCA(dir)
	require.NoError(t, err)
	assert.Equal(t, ca.Fingerprint(), back.Fingerprint())
	assert.Len(t, ca.Fingerprint(), 64)
	fi, err := os.Stat(filepath.Join(dir, CAKey))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	other, err := NewCA("other", day0)
	require.NoError(t, err)
	_, err = ParseCA(ca.CertPEM, other.KeyPEM)
	assert.ErrorContains(t, err, "does not match")
	_, err = LoadCA(t.TempDir())
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestNodeCertificateIsReusedAndRenewed(t *testing.T) {
	ca, err := NewCA("lab", day0)
	require.NoError(t, err)
	dir := t.TempDir()
	hosts := []string{"127.0.0.1", "localhost"}
	a, err := NodeCertificate(dir, ca, "n1", hosts, day0)
	require.NoError(t, err)
	b, err := NodeCertificate(dir, ca, "n1", hosts, day0.Add(24*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, a.Leaf.SerialNumber, b.Leaf.SerialNumber, "a valid certificate is kept")
	c, err := NodeCertificate(dir, ca, "n1", append(hosts, "10.0.0.7"), day0)
	require.NoError(t, err)
	assert.NotEqual(t, a.Leaf.SerialNumber, c.Leaf.SerialNumber, "a new address gets a new certificate")
	d, err := NodeCertificate(dir, ca, "n1", hosts, day0.Add(NodeValidity-RenewBefore+time.Hour))
	require.NoError(t, err)
	assert.NotEqual(t, c.Leaf.SerialNumber, d.Leaf.SerialNumber, "renewed before it expires")
	other, err := NewCA("other", day0)
	require.NoError(t, err)
	e, err := NodeCertificate(dir, other, "n1", hosts, day0)
	require.NoError(t, err)
	assert.NoError(t, e.Leaf.CheckSignatureFrom(other.Cert), "a certificate of another CA is replaced")
}

// A client trusting the CA reaches a server with the node certificate by
// IP and by name; one trusting another CA does not.
func TestServingWithTheNodeCertificate(t *testing.T) {
	ca, err := NewCA("lab", time.Now())
	require.NoError(t, err)
	cert, err := NodeCertificate(t.TempDir(), ca, "n1", Hosts("127.0.0.1"), time.Now())
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	get := func(pool *tls.Config, url string) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: pool}}
		res, err := c.Get(url)
		if err == nil {
			res.Body.Close()
		}
		return err
	}
	trust := &tls.Config{RootCAs: ca.Pool()}
	assert.NoError(t, get(trust, "https://127.0.0.1:"+port))
	assert.NoError(t, get(trust, "https://localhost:"+port))
	other, err := NewCA("other", time.Now())
	require.NoError(t, err)
	assert.Error(t, get(&tls.Config{RootCAs: other.Pool()}, "https://127.0.0.1:"+port))
}
