// Package pki holds a cluster's certificate authority and each node's
// serving certificate: the first node of a cluster makes the CA, joining
// nodes receive it (through a join token that pins its fingerprint), and
// every node issues its own API certificate from it.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Files in a node's cluster secrets dir.
const (
	CAFile   = "ca.crt"
	CAKey    = "ca.key"
	NodeFile = "node.crt"
	NodeKey  = "node.key"
)

// Validity of what is issued; a node certificate is issued again when less
// than RenewBefore of it is left.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	NodeValidity = 365 * 24 * time.Hour
	RenewBefore  = 30 * 24 * time.Hour
)

// CA is a cluster's certificate authority.
type CA struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA makes a CA named after the cluster, valid from now.
func NewCA(name string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ca key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "hf cluster CA " + name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("ca certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return ParseCA(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
}

// ParseCA reads a CA from its PEM certificate and key.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("ca certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("ca certificate: not a CA")
	}
	b, _ := pem.Decode(keyPEM)
	if b == nil {
		return nil, errors.New("ca key: no PEM block")
	}
	key, err := x509.ParseECPrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("ca key: %w", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("ca key: does not match the certificate")
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

func parseCert(certPEM []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

// Fingerprint is the SHA-256 of the CA certificate, hex: what a join token
// pins.
func (ca *CA) Fingerprint() string { return Fingerprint(ca.Cert.Raw) }

// Fingerprint is the SHA-256 of a DER certificate, hex.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// Pool is a cert pool holding the CA only.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue makes a serving certificate for hosts (DNS names and IPs), valid
// from now for NodeValidity, and returns it with its key, in PEM.
func (ca *CA) Issue(name string, hosts []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("node key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(NodeValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("node certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// covers reports whether cert names every host, was signed by ca and is
// valid long enough after now.
func (ca *CA) covers(cert *x509.Certificate, hosts []string, now time.Time) bool {
	if cert.CheckSignatureFrom(ca.Cert) != nil || now.Add(RenewBefore).After(cert.NotAfter) || now.Before(cert.NotBefore) {
		return false
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
				return false
			}
		} else if h != "" && !slices.Contains(cert.DNSNames, h) {
			return false
		}
	}
	return true
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

// LoadCA reads the CA of dir; fs.ErrNotExist when dir has none.
func LoadCA(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKey))
	if err != nil {
		return nil, err
	}
	return ParseCA(certPEM, keyPEM)
}

// SaveCA writes ca into dir (made 0700): the certificate 0644, the key 0600.
func SaveCA(dir string, ca *CA) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, CAKey), ca.KeyPEM, 0o600); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, CAFile), ca.CertPEM, 0o644)
}

// NodeCertificate returns the node's serving certificate from dir, issued
// again by ca (and saved) when there is none, when it does not name every
// host, or when it expires within RenewBefore.
func NodeCertificate(dir string, ca *CA, name string, hosts []string, now time.Time) (tls.Certificate, error) {
	certPEM, err1 := os.ReadFile(filepath.Join(dir, NodeFile))
	keyPEM, err2 := os.ReadFile(filepath.Join(dir, NodeKey))
	if err1 == nil && err2 == nil {
		if pair, err := tls.X509KeyPair(certPEM, keyPEM); err == nil && ca.covers(pair.Leaf, hosts, now) {
			return pair, nil
		}
	} else if (err1 != nil && !errors.Is(err1, fs.ErrNotExist)) || (err2 != nil && !errors.Is(err2, fs.ErrNotExist)) {
		return tls.Certificate{}, fmt.Errorf("read node certificate: %w", errors.Join(err1, err2))
	}
	certPEM, keyPEM, err := ca.Issue(name, hosts, now)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := writeFile(filepath.Join(dir, NodeKey), keyPEM, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	if err := writeFile(filepath.Join(dir, NodeFile), certPEM, 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// writeFile writes data to path atomically (a temp file renamed over it).
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Hosts are the names and addresses a node's API certificate must carry
// for an API listening at host (an IP, a name, or empty/unspecified for
// every interface): host itself, or every address of this machine, plus
// loopback, "localhost" and the machine's hostname.
func Hosts(host string, extra ...string) []string {
	out := []string{"localhost", "127.0.0.1", "::1"}
	if hn, err := os.Hostname(); err == nil && hn != "" {
		out = append(out, hn)
	}
	ip := net.ParseIP(host)
	switch {
	case host == "" || (ip != nil && ip.IsUnspecified()):
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					out = append(out, n.IP.String())
				}
			}
		}
	default:
		out = append(out, host)
	}
	out = append(out, extra...)
	slices.Sort(out)
	return slices.Compact(out)
}

// KeyID names a gossip key without showing it: the first 8 bytes of its
// SHA-256, hex.
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:8])
}
