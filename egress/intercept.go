package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
)

// intercept serves a CONNECT tunnel to a host with header rules, after
// its 200: the job's requests are read one at a time, given the host's
// headers and sent on the one connection up (the same connection a plain
// tunnel would splice). TLS from the job (its first byte a handshake) is
// answered with a certificate of the tenant's CA and continued towards
// the host as TLS the host's certificate must pass; plain HTTP stays
// plain. Upgrades (101, as WebSocket's) are spliced once answered. rec
// gets the bytes of the bodies each way, and the reason when it fails
// (never a header's value).
func (p *Proxy) intercept(ctx context.Context, c net.Conn, br *bufio.Reader, up net.Conn, host string, rec *Connection) {
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	var client net.Conn = &bufferedConn{Conn: c, r: br}
	cr := br
	if first[0] == 0x16 { // a TLS handshake record
		leaf, err := p.CA.leaf(host)
		if err != nil {
			rec.Reason = "could not make a certificate for " + host + ": " + err.Error()
			return
		}
		srv := tls.Server(client, &tls.Config{Certificates: []tls.Certificate{*leaf}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
		if err := srv.HandshakeContext(ctx); err != nil {
			rec.Reason = "the job's TLS handshake failed (does it trust the tenant's CA? SSL_CERT_FILE names the bundle): " + err.Error()
			return
		}
		defer srv.Close()
		tc := tls.Client(up, &tls.Config{ServerName: host, RootCAs: p.UpstreamRoots, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
		if err := tc.HandshakeContext(ctx); err != nil {
			rec.Reason = "the host's TLS: " + err.Error()
			writeStatus(srv, http.StatusBadGateway, rec.Reason)
			return
		}
		client, up, cr = srv, tc, bufio.NewReader(srv)
	}
	ur := bufio.NewReader(up)
	for {
		req, err := http.ReadRequest(cr)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.ErrUnexpectedEOF) {
				writeStatus(client, http.StatusBadRequest, "not an HTTP/1.1 request")
			}
			return
		}
		p.Rules.apply(host, req.Header)
		req.Header.Del("Proxy-Connection")
		req.Header.Del("Proxy-Authorization")
		body := &countingReader{r: req.Body}
		req.Body = body
		err = req.Write(up)
		rec.BytesOut += body.n.Load()
		if err != nil {
			rec.Reason = "could not send the request: " + err.Error()
			writeStatus(client, http.StatusBadGateway, rec.Reason)
			return
		}
		resp, err := http.ReadResponse(ur, req)
		if err != nil {
			rec.Reason = "the host's answer: " + err.Error()
			writeStatus(client, http.StatusBadGateway, rec.Reason)
			return
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			err := resp.Write(client)
			if err == nil {
				in, out := splice(client, cr, up, ur)
				rec.BytesIn, rec.BytesOut = rec.BytesIn+in, rec.BytesOut+out
			}
			return
		}
		in := &countingReader{r: resp.Body}
		resp.Body = in
		err = resp.Write(client)
		resp.Body.Close()
		rec.BytesIn += in.n.Load()
		if err != nil || req.Close || resp.Close {
			return
		}
	}
}

// splice copies both ways until both sides end; it returns the bytes that
// went in (from up) and out (to up).
func splice(client net.Conn, cr *bufio.Reader, up net.Conn, ur *bufio.Reader) (in, out int64) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		out, _ = io.Copy(up, cr)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}()
	in, _ = io.Copy(client, ur)
	client.Close()
	wg.Wait()
	return in, out
}

// bufferedConn is a connection whose reads start with what a reader
// already buffered of it.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }
