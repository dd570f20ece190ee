package egress

import (
	"container/list"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"sync"
	"time"
)

// CA is a tenant's egress certificate authority: the proxy presents a
// certificate it issues for a host whose requests get headers (and only
// for such a host), and the tenant's sandboxes trust it beside the system
// roots. Its key never leaves gantry (sealed at rest, held by runners);
// its certificate is public.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer
	leafKey *ecdsa.PrivateKey

	mu     sync.Mutex
	leaves map[string]*list.Element // host → *leafEntry in order
	order  *list.List               // most recently used first
}

type leafEntry struct {
	host string
	cert *tls.Certificate
}

// Lifetimes of the certificates.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 7 * 24 * time.Hour
	// maxLeaves bounds the certificates a CA keeps made (the least
	// recently used goes first).
	maxLeaves = 256
)

// GenerateCA makes a new CA's certificate and key (PEM), named for what
// it serves.
func GenerateCA(commonName string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName, Organization: []string{"gantry"}},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// NewCA reads a CA's certificate and key (PEM, as GenerateCA makes them).
func NewCA(certPEM, keyPEM []byte) (*CA, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("the CA's certificate or key is not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the CA's certificate: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the CA's key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok || !cert.IsCA {
		return nil, errors.New("not a CA certificate and its key")
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, certPEM: certPEM, key: signer, leafKey: leafKey, leaves: map[string]*list.Element{}, order: list.New()}, nil
}

// CertPEM is the CA's certificate, for the sandboxes to trust.
func (c *CA) CertPEM() []byte { return c.certPEM }

// leaf is the certificate the proxy presents for host, made on first use
// and again when half its life has passed.
func (c *CA) leaf(host string) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.leaves[host]; ok {
		le := e.Value.(*leafEntry)
		if time.Until(le.cert.Leaf.NotAfter) > leafLifetime/2 {
			c.order.MoveToFront(e)
			return le.cert, nil
		}
		c.order.Remove(e)
		delete(c.leaves, host)
	}
	cert, err := c.issue(host)
	if err != nil {
		return nil, err
	}
	c.leaves[host] = c.order.PushFront(&leafEntry{host: host, cert: cert})
	for c.order.Len() > maxLeaves {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.leaves, old.Value.(*leafEntry).host)
	}
	return cert, nil
}

func (c *CA) issue(host string) (*tls.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.Add(leafLifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		SubjectKeyId: func() []byte {
			s := sha256.Sum256([]byte(host))
			return s[:20]
		}(),
	}
	if a, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, a.AsSlice())
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &c.leafKey.PublicKey, c.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der, c.cert.Raw}, PrivateKey: c.leafKey, Leaf: leaf}, nil
}
