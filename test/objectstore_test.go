package test

import (
	"encoding/json"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

// relay passes connections to target on until it is cut: an outage of
// what is behind it, for one client only.
type relay struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
}

func newRelay(t *testing.T, target string) *relay {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{l: l, target: target}
	t.Cleanup(r.cut)
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, in, out)
			r.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return r
}

func (r *relay) addr() string { return r.l.Addr().String() }

// cut closes the relay and every connection through it: what is behind
// it is gone for its client, which finds nothing listening.
func (r *relay) cut() {
	r.l.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// TestFilesAPIObjectStoreOutage: while the object store is down (for an
// ingress whose S3 goes through a relay that is then cut), the files API
// says so — 503 with Retry-After, naming the object store — and does not
// blame the database, which is up.
func TestFilesAPIObjectStoreOutage(t *testing.T) {
	d := startDev(t, "GANTRY_DEV_RUNNER=false")
	s3 := newRelay(t, strings.TrimPrefix(d.s3URL, "http://"))
	replica := start(t, append(d.env, "GANTRY_ADDR=127.0.0.1:0", "GANTRY_S3_ENDPOINT=http://"+s3.addr()), "ingress")
	m := replica.waitOutput(t, regexp.MustCompile(`ingress listening.*addr=(\S+)`), 30*time.Second)
	r2 := &dev{url: "http://" + m[1], key: d.key}

	r := r2.call(t, "POST", "/v1/sessions", `{"language":"python"}`)
	var sess jobs.Session
	if err := json.Unmarshal(r.body, &sess); r.status != 201 || err != nil {
		t.Fatalf("create a session: %d %s", r.status, r.body)
	}
	files := "/v1/sessions/" + sess.ID + "/files"
	if r := r2.call(t, "PUT", files+"/data.csv", "a,b\n1,2\n"); r.status != 200 {
		t.Fatalf("put a file: %d %s", r.status, r.body)
	}
	if r := r2.call(t, "GET", files+"/data.csv", ""); r.status != 200 || string(r.body) != "a,b\n1,2\n" {
		t.Fatalf("read it back: %d %s", r.status, r.body)
	}

	s3.cut()
	for _, c := range []struct{ method, path, body string }{
		{"GET", files + "/data.csv", ""},
		{"GET", files, ""},
		{"PUT", files + "/more.csv", "c\n3\n"},
		{"DELETE", files + "/data.csv", ""},
	} {
		r := r2.call(t, c.method, c.path, c.body)
		var body struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal(r.body, &body)
		if r.status != 503 || body.Error.Code != "unavailable" || r.header.Get("Retry-After") == "" ||
			!strings.Contains(body.Error.Message, "object store") || strings.Contains(body.Error.Message, "database") {
			t.Errorf("%s %s with the object store down: %d Retry-After %q %s", c.method, c.path, r.status, r.header.Get("Retry-After"), r.body)
		}
	}
	// The database is up all along, and says so.
	if r := r2.call(t, "GET", "/v1/sessions/"+sess.ID, ""); r.status != 200 {
		t.Errorf("the session, from the database: %d %s", r.status, r.body)
	}
}
