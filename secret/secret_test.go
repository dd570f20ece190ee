package secret

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
)

func TestSealOpen(t *testing.T) {
	key, err := ParseKey(NewKey())
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := b.Seal([]byte("token-123"), "a")
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := b.Seal([]byte("token-123"), "a")
	if bytes.Equal(s1, s2) {
		t.Fatal("two seals of one value are equal: nonce reuse")
	}
	if bytes.Contains(s1, []byte("token-123")) {
		t.Fatal("plaintext visible in sealed value")
	}
	pt, err := b.Open(s1, "a")
	if err != nil || string(pt) != "token-123" {
		t.Fatalf("open = %q, %v", pt, err)
	}
	if _, err := b.Open(s1, "b"); err == nil {
		t.Fatal("opened under another context")
	}
	s1[len(s1)-1] ^= 1
	if _, err := b.Open(s1, "a"); err == nil {
		t.Fatal("opened a tampered value")
	}
	other, _ := New(bytes.Repeat([]byte{7}, KeySize))
	if _, err := other.Open(s2, "a"); err == nil {
		t.Fatal("opened under another key")
	}
	h1, _ := b.Hash([]byte("x"), "c")
	h2, _ := b.Hash([]byte("x"), "c")
	h3, _ := b.Hash([]byte("x"), "d")
	if !bytes.Equal(h1, h2) || bytes.Equal(h1, h3) {
		t.Fatal("hash is not stable per context")
	}
}

func TestNoKey(t *testing.T) {
	var b *Box
	if b.Enabled() {
		t.Fatal("nil box enabled")
	}
	if _, err := b.Seal([]byte("x"), ""); !errors.Is(err, ErrNoKey) {
		t.Fatalf("err = %v", err)
	}
}

func TestParseKey(t *testing.T) {
	for _, bad := range []string{"", "short", "zz" + NewKey()[2:]} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
	if _, err := ParseKey("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="); err != nil {
		t.Error(err)
	}
	path := filepath.Join(t.TempDir(), "k")
	k1, err := LoadOrCreateKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := LoadOrCreateKeyFile(path)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("key file not stable: %v", err)
	}
}
