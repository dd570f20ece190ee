package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/internal/eventually"
)

func TestParseAllowList(t *testing.T) {
	good := []string{"pypi.org", "*.example.com", "10.1.2.3:8080", "10.1.0.0/16", "[2001:db8::1]:443", "2001:db8::/32",
		"Files.PythonHosted.org.", "registry.npmjs.org:443"}
	if _, err := ParseAllowList(good); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "http://pypi.org", "pypi.org/simple", "*", "*.", "a*.example.com", "ex ample.com",
		"pypi.org:0", "pypi.org:99999", "pypi.org:x", "-a.com", "a..b", strings.Repeat("a", 64) + ".com"} {
		if _, err := ParseAllowList([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	many := make([]string, MaxAllow+1)
	for i := range many {
		many[i] = "h" + strconv.Itoa(i) + ".example.com"
	}
	if _, err := ParseAllowList(many); err == nil {
		t.Error("too many entries accepted")
	}

	a, _ := ParseAllowList(good)
	for _, c := range []struct {
		host string
		port int
		want bool
	}{
		{"pypi.org", 443, true}, {"PYPI.org.", 80, true}, {"pypi.org", 8080, false}, {"evil-pypi.org", 443, false},
		{"sub.pypi.org", 443, false},
		{"api.example.com", 443, true}, {"a.b.example.com", 80, true}, {"example.com", 443, false},
		{"10.1.2.3", 8080, true}, {"10.1.2.3", 443, true}, // the /16 allows 80 and 443
		{"10.1.9.9", 443, true}, {"10.2.0.1", 443, false}, {"10.1.2.3", 22, false},
		{"2001:db8::1", 443, true}, {"2001:db8:ffff::5", 80, true},
		{"files.pythonhosted.org", 443, true}, {"registry.npmjs.org", 80, false},
	} {
		if got := a.Allows(c.host, c.port); got != c.want {
			t.Errorf("Allows(%s, %d) = %v", c.host, c.port, got)
		}
	}
}

// serve runs p on a loopback listener and returns its address and the
// connections it recorded (after p's own Record, if it has one).
func serve(t *testing.T, p *Proxy) (string, func() []Connection) {
	t.Helper()
	var mu sync.Mutex
	var recs []Connection
	before := p.Record
	p.Record = func(c Connection) {
		if before != nil {
			before(c)
		}
		mu.Lock()
		recs = append(recs, c)
		mu.Unlock()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); ln.Close(); wg.Wait(); p.Close() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); p.ServeConn(ctx, c) }()
		}
	}()
	return ln.Addr().String(), func() []Connection { mu.Lock(); defer mu.Unlock(); return append([]Connection(nil), recs...) }
}

func TestProxy(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, "plain says hi to "+string(b))
	}))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "secure hello") }))
	defer secure.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the other server was reached") }))
	defer other.Close()

	plainAddr := strings.TrimPrefix(plain.URL, "http://")
	secureAddr := strings.TrimPrefix(secure.URL, "https://")
	allow, err := ParseAllowList([]string{plainAddr, secureAddr})
	if err != nil {
		t.Fatal(err)
	}
	addr, recs := serve(t, &Proxy{Allow: allow, Policy: Policy{AllowPrivate: true}})
	proxyURL, _ := url.Parse("http://" + addr)
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the test's own server
	c := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()

	resp, err := c.Post(plain.URL, "text/plain", strings.NewReader("gantry"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "plain says hi to gantry" {
		t.Fatalf("plain HTTP through the proxy: %d %q", resp.StatusCode, b)
	}
	resp, err = c.Get(secure.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "secure hello" {
		t.Fatalf("HTTPS through CONNECT: %q", b)
	}
	resp, err = c.Get(other.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "not on this tenant's egress allow-list") {
		t.Fatalf("a host not on the list: %d %q", resp.StatusCode, b)
	}
	tr.CloseIdleConnections()

	// A tunnel is recorded when both sides have closed.
	var got []Connection
	byHost := map[string]Connection{}
	eventually.Within(5*time.Second, func() bool {
		got = recs()
		for _, r := range got {
			byHost[net.JoinHostPort(r.Host, strconv.Itoa(r.Port))] = r
		}
		return len(byHost) >= 3
	})
	if r := byHost[plainAddr]; !r.Allowed || r.BytesOut != 6 || r.BytesIn != int64(len("plain says hi to gantry")) {
		t.Errorf("plain record %+v", r)
	}
	if r := byHost[secureAddr]; !r.Allowed || r.BytesOut == 0 || r.BytesIn == 0 {
		t.Errorf("tunnel record %+v", r)
	}
	if r := byHost[strings.TrimPrefix(other.URL, "http://")]; r.Allowed || r.Reason == "" {
		t.Errorf("refusal record %+v (all: %+v)", r, got)
	}
}

// TestProxyChecksTheDialledAddress: a listed host is still refused when it
// is (or resolves to) an address the operator's policy keeps jobs from.
func TestProxyChecksTheDialledAddress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("reached") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	allow, _ := ParseAllowList([]string{"127.0.0.1:" + port, "localhost:" + port})
	addr, recs := serve(t, &Proxy{Allow: allow, Policy: Policy{Setting: "GANTRY_EGRESS_ALLOW_PRIVATE"}})
	proxyURL, _ := url.Parse("http://" + addr)
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL)}
	defer tr.CloseIdleConnections()
	for _, u := range []string{srv.URL, "http://localhost:" + port} {
		resp, err := (&http.Client{Transport: tr}).Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "GANTRY_EGRESS_ALLOW_PRIVATE") {
			t.Errorf("%s: %d %q", u, resp.StatusCode, b)
		}
	}
	if n := len(recs()); n != 2 {
		t.Errorf("%d records", n)
	}
}

// TestProxyRefusesWhatIsNotAProxyRequest: garbage and origin-form requests
// get a clear 400 and nothing is dialled.
func TestProxyRefusesWhatIsNotAProxyRequest(t *testing.T) {
	addr, recs := serve(t, &Proxy{Policy: Policy{AllowPrivate: true}})
	for _, req := range []string{"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", "\x16\x03\x01\x00garbage\r\n\r\n", "GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, req)
		b, _ := io.ReadAll(c)
		c.Close()
		if !strings.HasPrefix(string(b), "HTTP/1.1 400") {
			t.Errorf("%q: %q", req, b)
		}
	}
	if n := len(recs()); n != 0 {
		t.Errorf("%d records", n)
	}
}

// TestProxySettle: a client can read its whole response before the proxy
// records it; Settle waits for that record, and gives up after its bound
// on a tunnel still open.
func TestProxySettle(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hi") }))
	defer srv.Close()
	hostport := strings.TrimPrefix(srv.URL, "http://")
	allow, err := ParseAllowList([]string{hostport})
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Allow: allow, Policy: Policy{AllowPrivate: true}, Record: func(Connection) { time.Sleep(100 * time.Millisecond) }}
	addr, recs := serve(t, p)
	proxyURL, _ := url.Parse("http://" + addr)
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL), DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hi" {
		t.Fatalf("through the proxy: %q", b)
	}
	if n := len(recs()); n != 0 {
		t.Fatalf("recorded %d before the slow record ended: the test shows nothing", n)
	}
	if !p.Settle(5 * time.Second) {
		t.Fatal("Settle gave up")
	}
	if got := recs(); len(got) != 1 || !got[0].Allowed {
		t.Fatalf("after Settle: %+v", got)
	}

	// A tunnel still open: Settle gives up after its bound.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport, hostport)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, "200") {
		t.Fatalf("CONNECT: %q %v", line, err)
	}
	start := time.Now()
	if p.Settle(50 * time.Millisecond) {
		t.Fatal("Settle with a tunnel open said settled")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Settle took %s", d)
	}
}
