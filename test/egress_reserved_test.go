package test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store/storetest"
)

// TestEgressNeverReachesGantry is issue 32's attack, tried again: the
// operator lets jobs reach loopback (GANTRY_EGRESS_PRIVATE), tenant A lists
// gantry's own NATS, Postgres, S3 and ingress by every spelling of their
// addresses, and its job asks the proxy for each while tenant B's job
// prints a secret. Each is refused with a 403 saying it is gantry's own
// service, nothing of B reaches A, and another server on loopback stays
// reachable. dev's NATS also refuses a client without its user.
func TestEgressNeverReachesGantry(t *testing.T) {
	dbURL := storetest.DatabaseURL(t)
	d := startDev(t, "GANTRY_DATABASE_URL="+dbURL, "GANTRY_EGRESS_PRIVATE=127.0.0.0/8,0.0.0.0,::1,localhost")
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "other service") }))
	defer other.Close()

	t.Run("dev NATS needs its user", func(t *testing.T) {
		nc, err := nats.Connect(d.natsURL, nats.MaxReconnects(0))
		if err == nil {
			nc.Close()
			t.Fatal("dev's NATS admitted a client without credentials")
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Errorf("without credentials: %v, want an authorization violation", err)
		}
		nc, err = nats.Connect(d.natsUserURL)
		if err != nil {
			t.Fatalf("with dev's user: %v", err)
		}
		nc.Close()
	})

	hostport := func(u string) string { return strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "nats://") }
	_, natsPort, _ := net.SplitHostPort(hostport(d.natsURL))
	pc, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	pgHostPort := net.JoinHostPort(pc.Host, fmt.Sprint(pc.Port))
	targets := map[string]string{ // host:port the job asks for → the service it is
		hostport(d.natsURL):              "NATS",
		"localhost:" + natsPort:          "NATS",
		"127.0.0.2:" + natsPort:          "NATS",
		"0.0.0.0:" + natsPort:            "NATS",
		"[::1]:" + natsPort:              "NATS",
		"[::ffff:127.0.0.1]:" + natsPort: "NATS",
		pgHostPort:                       "Postgres",
		hostport(d.s3URL):                "S3",
		hostport(d.url):                  "ingress",
		hostport(other.URL):              "",
	}
	var allow []string
	for hp := range targets {
		allow = append(allow, hp)
	}

	// Tenant A, with its own key, lists them all.
	d.cli(t, "tenants", "create", "tenant-a")
	a := &dev{proc: d.proc, url: d.url, key: d.cli(t, "keys", "create", "tenant-a", "attacker")}
	if r := a.call(t, "PATCH", "/v1/settings", mustJSON(map[string]any{"egress": map[string]any{"allow": allow}})); r.status != 200 {
		t.Fatalf("tenant A's allow-list: %d %s", r.status, r.body)
	}

	// Tenant B (dev's tenant) has a job printing a secret meanwhile.
	const secret = "b-secret-7f3a91"
	b := d.submit(t, map[string]any{"language": "bash", "env": map[string]string{"TOKEN": secret},
		"code": `for i in $(seq 1 150); do echo "$TOKEN"; sleep 0.1; done`, "timeout_ms": 60000})

	// A's job: a raw CONNECT for each (what NATS's or Postgres's protocol
	// would need), speaking NATS where a tunnel opens; and plain HTTP to
	// the ingress and S3.
	code := fmt.Sprintf(`
import http.client, json, socket, time
for hp in json.loads(%q):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(("CONNECT %%s HTTP/1.1\r\nHost: %%s\r\n\r\n" %% (hp, hp)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        c = s.recv(4096)
        if not c:
            break
        head += c
    status = head.split(b"\r\n", 1)[0].decode()
    if " 200 " in status:
        s.sendall(b'CONNECT {"verbose":false}\r\nSUB > 1\r\nPING\r\n')
        s.settimeout(3)
        got = b""
        try:
            end = time.time() + 3
            while time.time() < end:
                c = s.recv(65536)
                if not c:
                    break
                got += c
        except OSError:
            pass
        print(hp, "|", status, "|", got.decode(errors="replace").replace("\r\n", " "))
    else:
        body = head.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in head else b""
        try:
            while True:
                c = s.recv(4096)
                if not c:
                    break
                body += c
        except OSError:
            pass
        print(hp, "|", status, "|", body.decode().strip())
    s.close()
for u in json.loads(%q):
    # Through the proxy as HTTP_PROXY says (NO_PROXY would send loopback
    # URLs past it, to nothing).
    c = http.client.HTTPConnection("127.0.0.1", 3128, timeout=20)
    c.request("GET", u)
    r = c.getresponse()
    print("GET", u, "|", r.status, "|", r.read().decode().strip())
`, mustJSON(allow), mustJSON([]string{d.url + "/healthz", d.s3URL + "/", other.URL + "/"}))
	j := a.job(t, "POST", "/v1/execute?wait=2m", mustJSON(map[string]any{"language": "python", "code": code, "timeout_ms": 120000}))
	if j.Status != jobs.StatusSucceeded {
		t.Fatalf("tenant A's job: %s %q %q", j.Status, j.Stdout, j.Stderr)
	}
	if strings.Contains(j.Stdout, secret) || strings.Contains(j.Stdout, "MSG ") {
		t.Errorf("tenant A read NATS traffic:\n%s", j.Stdout)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(j.Stdout), "\n") {
		hp, rest, _ := strings.Cut(l, " | ")
		lines[hp] = rest
	}
	for hp, what := range targets {
		got := lines[hp]
		if what == "" {
			if !strings.Contains(got, " 200 ") {
				t.Errorf("CONNECT %s (not gantry's): %q", hp, got)
			}
			continue
		}
		if !strings.Contains(got, "403") || !strings.Contains(got, "is gantry's own "+what) {
			t.Errorf("CONNECT %s (gantry's %s): %q", hp, what, got)
		}
	}
	for u, want := range map[string]string{d.url + "/healthz": "403 | gantry egress: " + hostport(d.url) + " is gantry's own ingress",
		d.s3URL + "/": "403 | gantry egress: " + hostport(d.s3URL) + " is gantry's own S3", other.URL + "/": "200"} {
		if got := lines["GET "+u]; !strings.HasPrefix(got, want) {
			t.Errorf("GET %s: %q, want %q", u, got, want)
		}
	}
	refused := 0
	for _, c := range j.Egress {
		if !c.Allowed && strings.Contains(c.Reason, "gantry's own") {
			refused++
		}
	}
	if refused != len(targets)-1+2 {
		t.Errorf("%d refusals on the job's record, want %d: %+v", refused, len(targets)-1+2, j.Egress)
	}
	// B's job ran untouched.
	if j := d.job(t, "GET", "/v1/jobs/"+b.ID+"?wait=60s", ""); j.Status != jobs.StatusSucceeded || !strings.HasPrefix(j.Stdout, secret+"\n") {
		t.Errorf("tenant B's job: %s %q", j.Status, j.Stdout)
	}
}
