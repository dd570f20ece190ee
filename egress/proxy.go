package egress

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MaxAllow is the most entries an allow-list may have.
const MaxAllow = 100

// AllowList is where a tenant's jobs may connect through the egress proxy:
// host names ("pypi.org"), their subdomains ("*.example.com": every name
// below example.com, not example.com itself), IP addresses ("10.1.2.3")
// and prefixes ("10.1.0.0/16"), each optionally with a port
// ("10.1.2.3:8080", "api.example.com:8443"). An entry without a port allows
// ports 80 and 443. Names match without regard to case or a final dot. An
// address is matched as the job wrote it: a name on the list does not let
// a job reach its address by number, nor the other way round.
type AllowList struct{ entries []allowEntry }

type allowEntry struct {
	name   string       // a lowercase name without a final dot, or ""
	suffix bool         // name is "*.<name>": its subdomains
	prefix netip.Prefix // an address or prefix, when name is ""
	port   int          // 0: 80 and 443
}

// ParseAllowList checks and reads entries; an error names the bad entry.
func ParseAllowList(entries []string) (AllowList, error) {
	if len(entries) > MaxAllow {
		return AllowList{}, fmt.Errorf("has %d entries; at most %d", len(entries), MaxAllow)
	}
	var a AllowList
	for _, raw := range entries {
		e, err := parseAllowEntry(raw)
		if err != nil {
			return AllowList{}, fmt.Errorf("entry %q: %w", raw, err)
		}
		a.entries = append(a.entries, e)
	}
	return a, nil
}

func parseAllowEntry(raw string) (allowEntry, error) {
	s := strings.TrimSpace(raw)
	if s == "" || len(s) > 260 {
		return allowEntry{}, errors.New("must be a host name, an address or a prefix, optionally with :port")
	}
	var e allowEntry
	// An IPv6 address with a port is written [addr]:port.
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = strings.Trim(h, "[]"), p
	} else if strings.Count(s, ":") == 1 && !strings.Contains(s, "/") {
		return allowEntry{}, errors.New("has a bad port")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return allowEntry{}, errors.New("has a bad port (1 to 65535)")
		}
		e.port = n
	}
	host = strings.Trim(host, "[]")
	if p, err := netip.ParsePrefix(host); err == nil {
		e.prefix = p.Masked()
		return e, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		e.prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		return e, nil
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		e.suffix, name = true, rest
	}
	if !validName(name) {
		return allowEntry{}, errors.New("is not a host name (letters, digits, '-' and '.', with \"*.\" only in front)")
	}
	e.name = name
	return e, nil
}

func validName(n string) bool {
	if n == "" || len(n) > 253 || strings.HasPrefix(n, ".") || strings.Contains(n, "..") {
		return false
	}
	for _, label := range strings.Split(n, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Empty reports whether the list allows nothing.
func (a AllowList) Empty() bool { return len(a.entries) == 0 }

// Allows reports whether host:port is on the list. host is a name or a
// literal address as a job asked for it.
func (a AllowList) Allows(host string, port int) bool {
	h := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	addr, err := netip.ParseAddr(h)
	isAddr := err == nil
	for _, e := range a.entries {
		if e.port == 0 && port != 80 && port != 443 || e.port != 0 && e.port != port {
			continue
		}
		switch {
		case isAddr && e.name == "":
			if e.prefix.Contains(addr.Unmap()) {
				return true
			}
		case !isAddr && e.name != "" && e.suffix:
			if strings.HasSuffix(h, "."+e.name) {
				return true
			}
		case !isAddr && e.name != "":
			if h == e.name {
				return true
			}
		}
	}
	return false
}

// Connection is one connection a job asked the proxy for, as recorded.
type Connection struct {
	Host    string    `json:"host"`
	Port    int       `json:"port"`
	Allowed bool      `json:"allowed"`
	Reason  string    `json:"reason,omitempty"` // why it was refused or failed
	Start   time.Time `json:"start"`
	// BytesOut went from the job to the host, BytesIn from the host to the
	// job (bodies and tunnelled bytes; not the proxy's own headers).
	BytesOut int64 `json:"bytes_out"`
	BytesIn  int64 `json:"bytes_in"`
	// DurationMS is how long it was open.
	DurationMS int64 `json:"duration_ms"`
}

// Proxy is one job's egress proxy: it serves HTTP forward-proxy requests
// (absolute URIs over plain HTTP, and CONNECT tunnels for everything else,
// HTTPS first of all) to the hosts on the allow-list, and nothing else.
// Names are resolved by the proxy; the address it dials is checked again
// with Policy (never gantry's own services; public addresses only, unless
// the operator lists private ones), so a listed name that resolves to a
// refused address is refused. Every connection asked for, allowed or not,
// is given to Record.
type Proxy struct {
	Allow  AllowList
	Policy Policy
	// Rules set headers on requests to some hosts. For CONNECT to such a
	// host the proxy speaks to each side itself: TLS with a certificate CA
	// issues towards the job, TLS checked against UpstreamRoots (nil: the
	// system's) towards the host. Other hosts' tunnels stay end to end.
	Rules         HeaderRules
	CA            *CA
	UpstreamRoots *x509.CertPool
	// Record receives each connection when it ends (may be nil).
	Record func(Connection)
	// DialTimeout bounds connecting to a host (default 10 s).
	DialTimeout time.Duration
	// MaxConns bounds the connections open at once (default 64).
	MaxConns int

	open atomic.Int64
	once sync.Once
	tr   *http.Transport

	// busy counts the requests and tunnels being served, from their
	// request to their record; settled is closed when it falls to 0.
	mu      sync.Mutex
	busy    int
	settled chan struct{}
}

func (p *Proxy) begin() {
	p.mu.Lock()
	p.busy++
	p.mu.Unlock()
}

func (p *Proxy) end() {
	p.mu.Lock()
	p.busy--
	if p.busy == 0 && p.settled != nil {
		close(p.settled)
		p.settled = nil
	}
	p.mu.Unlock()
}

// Settle waits, at most d, until no request or tunnel is being served,
// and so every one served so far is recorded. A job's end can reach the
// runner before the proxy recorded the response its process read last;
// it reports whether everything settled.
func (p *Proxy) Settle(d time.Duration) bool {
	p.mu.Lock()
	if p.busy == 0 {
		p.mu.Unlock()
		return true
	}
	if p.settled == nil {
		p.settled = make(chan struct{})
	}
	ch := p.settled
	p.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

func (p *Proxy) init() {
	p.once.Do(func() {
		if p.DialTimeout == 0 {
			p.DialTimeout = 10 * time.Second
		}
		if p.MaxConns == 0 {
			p.MaxConns = 64
		}
		p.tr = &http.Transport{
			DialContext: p.Policy.DialContext(p.DialTimeout), MaxIdleConnsPerHost: 4,
			IdleConnTimeout: 30 * time.Second, ResponseHeaderTimeout: 5 * time.Minute, DisableCompression: true,
			// A job's redirects are the job's to follow, through the proxy.
			Proxy: nil,
		}
	})
}

// Close releases idle upstream connections.
func (p *Proxy) Close() {
	p.init()
	p.tr.CloseIdleConnections()
}

// ServeConn serves one client connection until it or ctx ends.
func (p *Proxy) ServeConn(ctx context.Context, c net.Conn) {
	p.init()
	defer c.Close()
	if n := p.open.Add(1); n > int64(p.MaxConns) {
		p.open.Add(-1)
		writeStatus(c, http.StatusServiceUnavailable, fmt.Sprintf("more than %d proxy connections at once", p.MaxConns))
		return
	}
	defer p.open.Add(-1)
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				writeStatus(c, http.StatusBadRequest, "not an HTTP proxy request")
			}
			return
		}
		if req.Method == http.MethodConnect {
			p.begin()
			p.tunnel(ctx, c, br, req)
			p.end()
			return
		}
		p.begin()
		more := p.forward(ctx, c, req)
		p.end()
		if !more {
			return
		}
	}
}

// target is where a request asks to go.
func target(req *http.Request, defPort int) (string, int, error) {
	hostport := req.Host
	if req.URL != nil && req.URL.Host != "" {
		hostport = req.URL.Host
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, strconv.Itoa(defPort)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || host == "" {
		return "", 0, fmt.Errorf("bad host %q", hostport)
	}
	return strings.Trim(host, "[]"), n, nil
}

// check decides a connection; the reason says why not.
func (p *Proxy) check(host string, port int) string {
	if !p.Allow.Allows(host, port) {
		return fmt.Sprintf("%s:%d is not on this tenant's egress allow-list", host, port)
	}
	if err := p.Policy.CheckHost(host); err != nil {
		return err.Error()
	}
	if _, err := netip.ParseAddr(host); err != nil {
		if err := p.Policy.CheckName(host); err != nil {
			return err.Error()
		}
	}
	return p.Rules.refusal(host)
}

func (p *Proxy) record(c Connection) {
	c.DurationMS = time.Since(c.Start).Milliseconds()
	if p.Record != nil {
		p.Record(c)
	}
}

// tunnel serves CONNECT: a raw tunnel to an allowed host.
func (p *Proxy) tunnel(ctx context.Context, c net.Conn, br *bufio.Reader, req *http.Request) {
	host, port, err := target(req, 443)
	if err != nil {
		writeStatus(c, http.StatusBadRequest, err.Error())
		return
	}
	rec := Connection{Host: host, Port: port, Start: time.Now()}
	if why := p.check(host, port); why != "" {
		rec.Reason = why
		p.record(rec)
		writeStatus(c, http.StatusForbidden, why)
		return
	}
	dctx, cancel := context.WithTimeout(ctx, p.DialTimeout)
	up, err := p.Policy.DialContext(p.DialTimeout)(dctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	cancel()
	if err != nil {
		var code int
		code, rec.Reason = dialFailure(err)
		p.record(rec)
		writeStatus(c, code, rec.Reason)
		return
	}
	defer up.Close()
	rec.Allowed = true
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		p.record(rec)
		return
	}
	if p.CA != nil && p.Rules.For(host) != nil {
		p.intercept(ctx, c, br, up, host, &rec)
		p.record(rec)
		return
	}
	// What the client sent after its CONNECT is already buffered.
	var out, in atomic.Int64
	done := make(chan struct{})
	go func() {
		n, _ := io.Copy(up, br)
		out.Add(n)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		close(done)
	}()
	n, _ := io.Copy(c, up)
	in.Add(n)
	c.Close() // the client's side ends: the other copy ends too
	<-done
	rec.BytesOut, rec.BytesIn = out.Load(), in.Load()
	p.record(rec)
}

// forward serves one plain-HTTP request with an absolute URI; it reports
// whether the client connection may serve another.
func (p *Proxy) forward(ctx context.Context, c net.Conn, req *http.Request) bool {
	if req.URL == nil || !req.URL.IsAbs() || req.URL.Scheme != "http" {
		writeStatus(c, http.StatusBadRequest, "a proxy request needs an absolute http:// URI (use CONNECT for https)")
		return false
	}
	host, port, err := target(req, 80)
	if err != nil {
		writeStatus(c, http.StatusBadRequest, err.Error())
		return false
	}
	rec := Connection{Host: host, Port: port, Start: time.Now()}
	if why := p.check(host, port); why != "" {
		rec.Reason = why
		p.record(rec)
		writeStatus(c, http.StatusForbidden, why)
		return !req.Close
	}
	out := &countingReader{r: req.Body}
	req = req.WithContext(ctx)
	req.RequestURI = ""
	req.Body = out
	removeHopHeaders(req.Header)
	p.Rules.apply(host, req.Header)
	resp, err := p.tr.RoundTrip(req)
	if err != nil {
		var code int
		code, rec.Reason = dialFailure(err)
		rec.BytesOut = out.n.Load()
		p.record(rec)
		writeStatus(c, code, rec.Reason)
		return false
	}
	defer resp.Body.Close()
	rec.Allowed = true
	removeHopHeaders(resp.Header)
	in := &countingReader{r: resp.Body}
	resp.Body = in
	err = resp.Write(c)
	rec.BytesOut, rec.BytesIn = out.n.Load(), in.n.Load()
	p.record(rec)
	return err == nil && !req.Close && !resp.Close
}

// dialFailure is the status and reason of a connection that could not be
// made: 403 when the policy refused the address dialled, else 502.
func dialFailure(err error) (int, string) {
	if r, ok := IsRefusal(err); ok {
		return http.StatusForbidden, r.Error()
	}
	return http.StatusBadGateway, dialReason(err)
}

func dialReason(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		err = oe.Err
	}
	return "could not connect: " + err.Error()
}

var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Upgrade"}

func removeHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

func writeStatus(w io.Writer, code int, msg string) {
	body := "gantry egress: " + msg + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(body), body)
}

// countingReader counts what is read through it; the transport may read a
// request's body on a goroutine of its own.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.r == nil {
		return 0, io.EOF
	}
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingReader) Close() error {
	if rc, ok := c.r.(io.Closer); ok {
		return rc.Close()
	}
	return nil
}
