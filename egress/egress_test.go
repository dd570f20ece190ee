package egress

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPublicIP(t *testing.T) {
	for addr, public := range map[string]bool{
		"8.8.8.8": true, "2001:4860:4860::8888": true,
		"127.0.0.1": false, "10.1.2.3": false, "172.16.0.1": false, "192.168.1.1": false,
		"169.254.169.254": false, "100.64.0.1": false, "0.0.0.0": false, "::1": false,
		"fe80::1": false, "fd00::1": false, "::ffff:10.0.0.1": false, "224.0.0.1": false,
	} {
		if got := PublicIP(net.ParseIP(addr)); got != public {
			t.Errorf("PublicIP(%s) = %v, want %v", addr, got, public)
		}
	}
}

func TestCheckHost(t *testing.T) {
	p := Policy{Setting: "GANTRY_X_ALLOW_PRIVATE"}
	for _, h := range []string{"127.0.0.1", "[::1]", "localhost", "LOCALHOST.", "api.localhost", "10.0.0.7", "169.254.169.254"} {
		if err := p.CheckHost(h); err == nil || !strings.Contains(err.Error(), "GANTRY_X_ALLOW_PRIVATE") {
			t.Errorf("CheckHost(%s) = %v, want a refusal naming the setting", h, err)
		}
	}
	for _, h := range []string{"example.com", "8.8.8.8", "[2001:4860:4860::8888]"} {
		if err := p.CheckHost(h); err != nil {
			t.Errorf("CheckHost(%s) = %v", h, err)
		}
	}
	if err := (Policy{AllowPrivate: true}).CheckHost("127.0.0.1"); err != nil {
		t.Errorf("allowed private: %v", err)
	}
}

// TestTransportChecksTheDialledAddress: a name that resolves to loopback is
// refused when dialled, not only literal addresses.
func TestTransportChecksTheDialledAddress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	url := "http://localhost:" + port + "/"

	c := &http.Client{Transport: Policy{Setting: "GANTRY_X_ALLOW_PRIVATE"}.Transport()}
	if resp, err := c.Get(url); err == nil {
		resp.Body.Close()
		t.Fatal("a loopback receiver was reached")
	} else if !strings.Contains(err.Error(), "is not public") {
		t.Errorf("error %v does not say why", err)
	}
	c = &http.Client{Transport: Policy{AllowPrivate: true}.Transport()}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("allowed: %v", err)
	}
	resp.Body.Close()
}
