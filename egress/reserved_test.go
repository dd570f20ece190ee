package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

// testReserved is a Reserved whose lookups and interface addresses the
// test gives.
func testReserved(endpoints []Endpoint, names map[string][]string, local ...string) *Reserved {
	r := NewReserved(endpoints, nil)
	r.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		as, ok := names[host]
		if !ok {
			return nil, errors.New("no such host")
		}
		var out []netip.Addr
		for _, a := range as {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
	r.interfaces = func() ([]netip.Addr, error) {
		var out []netip.Addr
		for _, a := range local {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
	return r
}

func TestReserved(t *testing.T) {
	r := testReserved([]Endpoint{
		{What: "NATS", Host: "127.0.0.1", Port: 4222},
		{What: "Postgres", Host: "db.internal", Port: 5432},
		{What: "the ingress", Host: "", Port: 8080},
		{What: "S3", Host: "s3.gone", Port: 7070},
		{What: "the operator's deny list", Host: "192.168.50.0/24"},
	}, map[string][]string{"db.internal": {"10.1.1.1", "fd00::5"}}, "10.9.9.9", "fe80::1")
	ctx := context.Background()
	for _, c := range []struct {
		addr, what string // what: "" when allowed
	}{
		{"127.0.0.1:4222", "NATS"}, {"127.0.0.2:4222", "NATS"}, {"[::1]:4222", "NATS"}, {"[::ffff:127.0.0.1]:4222", "NATS"},
		{"0.0.0.0:4222", "NATS"}, {"[::]:4222", "NATS"}, {"0.1.2.3:4222", "NATS"}, {"10.9.9.9:4222", "NATS"},
		{"[fe80::1%eth0]:4222", "NATS"}, {"[64:ff9b::7f00:1]:4222", "NATS"}, {"[2002:7f00:1::]:4222", "NATS"},
		{"[::127.0.0.1]:4222", "NATS"},
		{"127.0.0.1:4223", ""}, {"10.9.9.8:4222", ""},
		{"10.1.1.1:5432", "Postgres"}, {"[fd00::5]:5432", "Postgres"}, {"[::ffff:10.1.1.1]:5432", "Postgres"},
		{"10.1.1.2:5432", ""}, {"10.1.1.1:5433", ""},
		{"127.0.0.1:8080", "the ingress"}, {"10.9.9.9:8080", "the ingress"}, {"8.8.8.8:8080", ""},
		{"192.168.50.7:22", "the operator's deny list"}, {"[::ffff:192.168.50.7]:443", "the operator's deny list"},
		{"192.168.51.7:22", ""},
	} {
		err := r.Check(ctx, netip.MustParseAddrPort(c.addr))
		switch {
		case c.what == "" && err != nil:
			t.Errorf("%s refused: %v", c.addr, err)
		case c.what != "" && (err == nil || !strings.Contains(err.Error(), "gantry's own "+c.what)):
			t.Errorf("%s: %v, want a refusal naming %s", c.addr, err, c.what)
		}
		if _, ok := IsRefusal(err); err != nil && !ok {
			t.Errorf("%s: %T is not a Refusal", c.addr, err)
		}
	}
	// A name never resolved closes its port: where it is is not known.
	if err := r.Check(ctx, netip.MustParseAddrPort("203.0.113.9:7070")); err == nil || !strings.Contains(err.Error(), "could not be resolved") {
		t.Errorf("an unresolved endpoint's port: %v", err)
	}
	// Once resolved, a failing lookup keeps the last answer.
	names := map[string][]string{"s3.gone": {"10.2.2.2"}}
	r = testReserved([]Endpoint{{What: "S3", Host: "s3.gone", Port: 7070}}, names)
	if err := r.Check(ctx, netip.MustParseAddrPort("203.0.113.9:7070")); err != nil {
		t.Fatal(err)
	}
	delete(names, "s3.gone")
	r.names["s3.gone"] = resolved{addrs: r.names["s3.gone"].addrs} // stale
	if err := r.Check(ctx, netip.MustParseAddrPort("10.2.2.2:7070")); err == nil {
		t.Error("a stale answer was dropped when the lookup failed")
	}
	// Endpoints found later (a NATS cluster's discovered servers) count.
	more := []Endpoint{}
	r = NewReserved(nil, func() []Endpoint { return more })
	if err := r.Check(ctx, netip.MustParseAddrPort("10.3.3.3:4222")); err != nil {
		t.Fatal(err)
	}
	more = append(more, Endpoint{What: "NATS", Host: "10.3.3.3", Port: 4222})
	if err := r.Check(ctx, netip.MustParseAddrPort("10.3.3.3:4222")); err == nil {
		t.Error("a discovered endpoint was reached")
	}
}

func TestParseEndpoint(t *testing.T) {
	for in, want := range map[string]Endpoint{
		"nats-1:4222":     {What: "x", Host: "nats-1", Port: 4222},
		"[::1]:8080":      {What: "x", Host: "::1", Port: 8080},
		"10.0.0.0/8":      {What: "x", Host: "10.0.0.0/8"},
		"10.0.0.0/8:5432": {What: "x", Host: "10.0.0.0/8", Port: 5432},
		"db.internal":     {What: "x", Host: "db.internal"},
		"10.1.2.3":        {What: "x", Host: "10.1.2.3"},
	} {
		got, err := ParseEndpoint("x", in)
		if err != nil || got != want {
			t.Errorf("ParseEndpoint(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "*.x.com", "a..b", "x:0", "http://x"} {
		if _, err := ParseEndpoint("x", bad); err == nil {
			t.Errorf("ParseEndpoint(%q) accepted", bad)
		}
	}
}

func TestPrivateList(t *testing.T) {
	l, err := ParsePrivateList([]string{"10.1.0.0/16", "127.0.0.1", "*.corp.example", "db.local", " "})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"10.1.0.0/16:80", "http://x", "a*.b"} {
		if _, err := ParsePrivateList([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	p := Policy{Private: l, Setting: "GANTRY_EGRESS_PRIVATE"}
	ctx := context.Background()
	for _, c := range []struct {
		name, addr string
		ok         bool
	}{
		{"", "10.1.2.3:80", true}, {"", "[::ffff:10.1.2.3]:80", true}, {"", "10.2.0.1:80", false},
		{"", "127.0.0.1:5000", true}, {"", "127.0.0.2:5000", false},
		{"api.corp.example", "10.9.0.1:443", true}, {"corp.example", "10.9.0.1:443", false},
		{"DB.local.", "192.168.1.4:5432", true}, {"other.local", "192.168.1.4:5432", false},
		{"", "8.8.8.8:443", true},
	} {
		err := p.CheckAddr(ctx, c.name, netip.MustParseAddrPort(c.addr))
		if (err == nil) != c.ok {
			t.Errorf("CheckAddr(%q, %s) = %v", c.name, c.addr, err)
		}
		if err != nil && !strings.Contains(err.Error(), "GANTRY_EGRESS_PRIVATE") {
			t.Errorf("refusal %v does not name the setting", err)
		}
	}
	if err := p.CheckHost("127.0.0.2"); err == nil {
		t.Error("CheckHost let an unlisted loopback address through")
	}
	if err := p.CheckHost("10.1.5.5"); err != nil {
		t.Errorf("CheckHost refused a listed prefix: %v", err)
	}
	// Reserved wins over everything the operator allows.
	p.AllowPrivate = true
	p.Reserved = testReserved([]Endpoint{{What: "NATS", Host: "127.0.0.1", Port: 4222}}, nil)
	if err := p.CheckAddr(ctx, "", netip.MustParseAddrPort("127.0.0.1:4222")); err == nil {
		t.Error("a reserved address was let through by AllowPrivate")
	}
}

// TestProxyRefusesReserved: gantry's own services are refused through the
// proxy with a 403 saying why, whatever the allow-list and the operator's
// private setting say, by every spelling of their address, over CONNECT
// and plain HTTP alike; another local server stays reachable.
func TestProxyRefusesReserved(t *testing.T) {
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("gantry's own service was reached") }))
	defer own.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "other") }))
	defer other.Close()
	_, port, _ := net.SplitHostPort(own.Listener.Addr().String())
	spellings := []string{"127.0.0.1:" + port, "127.0.0.2:" + port, "localhost:" + port, "[::1]:" + port, "[::ffff:127.0.0.1]:" + port, "0.0.0.0:" + port}
	allow, err := ParseAllowList(append(append([]string{}, spellings...), strings.TrimPrefix(other.URL, "http://")))
	if err != nil {
		t.Fatal(err)
	}
	res := NewReserved([]Endpoint{{What: "NATS", Host: "127.0.0.1", Port: mustPort(t, port)}}, nil)
	addr, recs := serve(t, &Proxy{Allow: allow, Policy: Policy{AllowPrivate: true, Reserved: res}})
	proxyURL, _ := url.Parse("http://" + addr)
	tr := &http.Transport{Proxy: http.ProxyURL(proxyURL)}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for _, hp := range spellings {
		// Plain HTTP: an absolute URI.
		resp, err := c.Get("http://" + hp + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "gantry's own NATS") {
			t.Errorf("GET via %s: %d %q", hp, resp.StatusCode, b)
		}
		// CONNECT: a raw tunnel, what NATS's protocol would use.
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second)) // a tunnel opened would wait for ever
		_, _ = io.WriteString(conn, "CONNECT "+hp+" HTTP/1.1\r\nHost: "+hp+"\r\n\r\n")
		b, _ = io.ReadAll(conn)
		conn.Close()
		if !strings.HasPrefix(string(b), "HTTP/1.1 403") || !strings.Contains(string(b), "gantry's own NATS") {
			t.Errorf("CONNECT %s: %q", hp, b)
		}
	}
	resp, err := c.Get(other.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "other" {
		t.Errorf("another local server: %d %q", resp.StatusCode, b)
	}
	for _, r := range recs() {
		if r.Allowed != (r.Port != mustPort(t, port)) {
			t.Errorf("record %+v", r)
		}
	}
}

func mustPort(t *testing.T, s string) int {
	t.Helper()
	ap, err := netip.ParseAddrPort("0.0.0.0:" + s)
	if err != nil {
		t.Fatal(err)
	}
	return int(ap.Port())
}
