// Package secret seals values gantry must keep but never show: upstream MCP
// credentials and the personal data behind privacy tokens. Values are
// sealed with AES-256-GCM under the operator's key (GANTRY_SECRET_KEY), with
// associated data binding each ciphertext to where it is stored, so a
// sealed value copied to another row or tenant does not open.
package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeySize is the length of a key in bytes.
const KeySize = 32

// ErrNoKey is an operation that needs a key on a server configured without one.
var ErrNoKey = errors.New("GANTRY_SECRET_KEY is not set: gantry cannot store secrets")

// Box seals and opens values under one key. The zero value (and a nil *Box)
// has no key: every operation fails with ErrNoKey.
type Box struct {
	aead cipher.AEAD
	mac  []byte // HMAC key derived from the key, for lookups by value
}

// New returns a Box for a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secret key must be %d bytes, got %d", KeySize, len(key))
	}
	// Separate subkeys for encryption and for lookup hashes.
	enc := derive(key, "gantry seal v1")
	block, err := aes.NewCipher(enc)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead, mac: derive(key, "gantry lookup v1")}, nil
}

func derive(key []byte, label string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// ParseKey decodes a key written as 64 hex digits or as base64 (standard or
// URL alphabet, padded or not) of 32 bytes.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*KeySize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == KeySize {
			return b, nil
		}
	}
	return nil, fmt.Errorf("secret key must be %d bytes as 64 hex digits or base64 (generate one with `openssl rand -hex 32`)", KeySize)
}

// NewKey returns a fresh random key, hex-encoded.
func NewKey() string {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// LoadOrCreateKeyFile reads a hex key from path, creating the file (mode
// 0600) with a fresh key when it does not exist. Used by dev mode.
func LoadOrCreateKeyFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		k := NewKey()
		if err := os.WriteFile(path, []byte(k+"\n"), 0o600); err != nil {
			return nil, err
		}
		return ParseKey(k)
	}
	if err != nil {
		return nil, err
	}
	return ParseKey(string(data))
}

// Enabled reports whether b has a key.
func (b *Box) Enabled() bool { return b != nil && b.aead != nil }

// Seal encrypts plaintext, bound to context (e.g. "mcp-server:<tenant>:<name>").
func (b *Box) Seal(plaintext []byte, context string) ([]byte, error) {
	if !b.Enabled() {
		return nil, ErrNoKey
	}
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return b.aead.Seal(nonce, nonce, plaintext, []byte(context)), nil
}

// Open decrypts what Seal made with the same context.
func (b *Box) Open(sealed []byte, context string) ([]byte, error) {
	if !b.Enabled() {
		return nil, ErrNoKey
	}
	n := b.aead.NonceSize()
	if len(sealed) < n+b.aead.Overhead() {
		return nil, errors.New("sealed value is too short")
	}
	pt, err := b.aead.Open(nil, sealed[:n], sealed[n:], []byte(context))
	if err != nil {
		return nil, errors.New("sealed value does not open: wrong GANTRY_SECRET_KEY or tampered data")
	}
	return pt, nil
}

// Hash returns a keyed hash of value under context, for finding a sealed
// value by its plaintext without storing the plaintext.
func (b *Box) Hash(value []byte, context string) ([]byte, error) {
	if !b.Enabled() {
		return nil, ErrNoKey
	}
	m := hmac.New(sha256.New, b.mac)
	m.Write([]byte(context))
	m.Write([]byte{0})
	m.Write(value)
	return m.Sum(nil), nil
}
