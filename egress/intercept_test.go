package egress

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestNarrowing(t *testing.T) {
	n, err := ParseNarrowing([]string{"api.example.com", "10.1.2.3"}, []string{"0.0.0.0/0"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseNarrowing(nil, []string{"*.evil.example", "192.168.0.0/16"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n          Narrowing
		name, addr string
		want       bool
	}{
		{n, "api.example.com", "93.184.216.34", true}, // allow wins over all traffic
		{n, "", "10.1.2.3", true},
		{n, "other.example.com", "93.184.216.34", false},
		{n, "", "2001:db8::1", false}, // all traffic covers IPv6
		{m, "a.evil.example", "8.8.8.8", false},
		{m, "good.example", "192.168.4.4", false}, // the address is denied, whatever the name
		{m, "good.example", "8.8.8.8", true},
		{Narrowing{}, "x", "8.8.8.8", true},
	} {
		if got := c.n.allows(c.name, netip.MustParseAddr(c.addr)); got != c.want {
			t.Errorf("allows(%q, %s) = %v", c.name, c.addr, got)
		}
	}
	if !m.refusesName("x.evil.example") || m.refusesName("good.example") {
		t.Error("refusesName")
	}
	for _, bad := range [][]string{{""}, {"http://x"}, {"10.0.0.0/8:80"}} {
		if _, err := ParseNarrowing(bad, nil); err == nil || !strings.Contains(err.Error(), "allow_out") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// upstreamTLS serves h over TLS as name, with a certificate of a CA of its
// own; it returns the server and a pool trusting that CA.
func upstreamTLS(t *testing.T, name string, h http.Handler) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	certPEM, keyPEM, err := GenerateCA("upstream test CA")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := NewCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.leaf(name)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*leaf}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	return srv, pool
}

// TestProxyInjectsHeaders: a host with rules gets its headers over HTTPS
// (TLS ended with the tenant's CA, the host's certificate checked) and
// plain HTTP, replacing what the job sent; a host without rules keeps TLS
// end to end; no record holds the secret.
func TestProxyInjectsHeaders(t *testing.T) {
	const secret = "Bearer s3cret-value-91"
	seen := make(chan string, 8)
	api, roots := upstreamTLS(t, "localhost", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "api got %s %q", r.Method, b)
	}))
	other, otherRoots := upstreamTLS(t, "localhost", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
		_, _ = io.WriteString(w, "other")
	}))
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
		_, _ = io.WriteString(w, "plain")
	}))
	defer plain.Close()
	port := func(u string) string {
		_, p, _ := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://"))
		return p
	}
	apiHost, otherHost, plainHost := "localhost:"+port(api.URL), "127.0.0.1:"+port(other.URL), "localhost:"+port(plain.URL)
	allow, _ := ParseAllowList([]string{apiHost, otherHost, plainHost})
	tenantPEM, tenantKey, err := GenerateCA("tenant CA")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := NewCA(tenantPEM, tenantKey)
	if err != nil {
		t.Fatal(err)
	}
	rules := NewHeaderRules(map[string]http.Header{"localhost": {"Authorization": {secret}}})
	if s := fmt.Sprintf("%v %+v %#v", rules, rules, rules); strings.Contains(s, "s3cret") {
		t.Fatalf("the rules print their values: %s", s)
	}
	addr, recs := serve(t, &Proxy{Allow: allow, Policy: Policy{AllowPrivate: true}, Rules: rules, CA: ca, UpstreamRoots: roots})
	proxyURL, _ := url.Parse("http://" + addr)

	// The job trusts the tenant's CA (and the other host's own, for the
	// tunnel that stays end to end).
	trust := x509.NewCertPool()
	trust.AppendCertsFromPEM(ca.CertPEM())
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: trust}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	req, _ := http.NewRequest("POST", "https://"+apiHost+"/v1/x", strings.NewReader("ping"))
	req.Header.Set("Authorization", "Bearer the-job-s-own")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != `api got POST "ping"` || <-seen != secret {
		t.Fatalf("HTTPS with a rule: %d %q", resp.StatusCode, b)
	}
	if got := resp.TLS.PeerCertificates[0].Issuer.CommonName; got != "tenant CA" {
		t.Errorf("the job saw a certificate from %q, want the tenant's CA", got)
	}
	// A second request on the same connection gets it too.
	resp, err = c.Get("https://" + apiHost + "/again")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := <-seen; got != secret {
		t.Errorf("the second request: %q", got)
	}

	// Plain HTTP through the proxy.
	resp, err = c.Get("http://" + plainHost + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := <-seen; got != secret {
		t.Errorf("plain HTTP with a rule: %q", got)
	}

	// No rule for 127.0.0.1: the tunnel is end to end, the job sees the
	// host's own certificate (which the tenant's CA did not issue).
	otherTr := &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: otherRoots, ServerName: "localhost"}}
	defer otherTr.CloseIdleConnections()
	resp, err = (&http.Client{Transport: otherTr}).Get("https://" + otherHost + "/")
	if err != nil {
		t.Fatalf("end-to-end TLS to a host without rules: %v", err)
	}
	resp.Body.Close()
	if got := <-seen; got != "" {
		t.Errorf("a host without rules got %q", got)
	}

	// A host whose certificate the proxy does not trust: 502, said.
	bad := &Proxy{Allow: allow, Policy: Policy{AllowPrivate: true}, Rules: rules, CA: ca}
	badAddr, _ := serve(t, bad)
	badURL, _ := url.Parse("http://" + badAddr)
	badTr := &http.Transport{Proxy: http.ProxyURL(badURL), TLSClientConfig: &tls.Config{RootCAs: trust}}
	defer badTr.CloseIdleConnections()
	resp, err = (&http.Client{Transport: badTr}).Get("https://" + apiHost + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "the host's TLS") {
		t.Errorf("an untrusted host: %d %q", resp.StatusCode, b)
	}
	tr.CloseIdleConnections()
	for _, r := range recs() {
		if s := fmt.Sprintf("%+v", r); strings.Contains(s, "s3cret") {
			t.Errorf("a record holds the secret: %s", s)
		}
	}
}

// TestProxyNarrowing: a job's or sandbox's own rules refuse below the
// allow-list, by name before dialling and by address when dialled.
func TestProxyNarrowing(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	allow, _ := ParseAllowList([]string{"localhost:" + port, "127.0.0.1:" + port})
	for _, c := range []struct {
		allowOut, denyOut []string
		host              string
		want              int
	}{
		{nil, []string{"localhost"}, "localhost", 403},
		{nil, []string{"127.0.0.0/8"}, "localhost", 403}, // by the address dialled
		{[]string{"localhost"}, []string{"0.0.0.0/0"}, "localhost", 200},
		{[]string{"localhost"}, []string{"0.0.0.0/0"}, "127.0.0.1", 403},
		{nil, []string{"*.example.com"}, "127.0.0.1", 200},
	} {
		n, err := ParseNarrowing(c.allowOut, c.denyOut)
		if err != nil {
			t.Fatal(err)
		}
		addr, _ := serve(t, &Proxy{Allow: allow, Policy: Policy{AllowPrivate: true, Narrow: []Narrowing{n}}})
		proxyURL, _ := url.Parse("http://" + addr)
		tr := &http.Transport{Proxy: http.ProxyURL(proxyURL)}
		resp, err := (&http.Client{Transport: tr}).Get("http://" + c.host + ":" + port + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		if resp.StatusCode != c.want || c.want == 403 && !strings.Contains(string(b), "own network rules") {
			t.Errorf("allow %v deny %v, %s: %d %q", c.allowOut, c.denyOut, c.host, resp.StatusCode, b)
		}
	}
}

// FuzzParseNarrowing: whatever a request's allow_out and deny_out say, no
// panic, and what is accepted decides every address.
func FuzzParseNarrowing(f *testing.F) {
	f.Add("api.example.com", "0.0.0.0/0")
	f.Add("*.a.b", "10.0.0.0/8")
	f.Add("[::1]", "fe80::/10")
	f.Fuzz(func(t *testing.T, allow, deny string) {
		n, err := ParseNarrowing([]string{allow}, []string{deny})
		if err != nil {
			return
		}
		_ = n.allows("x.example", netip.MustParseAddr("192.0.2.1"))
		_ = n.refusesName(allow)
	})
}
