package main

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/blob"
	"github.com/gantryhq/gantry/queue"
)

// TestReservedEndpoints: every engine the settings name is kept out of
// jobs' reach, on its port, with what it is in the refusal.
func TestReservedEndpoints(t *testing.T) {
	cfg := config{
		NATSURL:     "nats://gantry:pw@10.0.0.4:4222,nats://10.0.0.5",
		DatabaseURL: "postgres://u:p@10.0.0.6,10.0.0.7:5433/gantry",
		S3:          blob.Config{Endpoint: "http://10.0.0.8:7070", PublicEndpoint: "https://10.0.0.9"},
		Addr:        ":8080",
		RunnerAddr:  "127.0.0.1:9090",
	}
	r := reservedEndpoints(cfg, nil)
	for addr, what := range map[string]string{
		"10.0.0.4:4222": "NATS", "10.0.0.5:4222": "NATS", "10.0.0.6:5432": "Postgres", "10.0.0.7:5433": "Postgres",
		"10.0.0.8:7070": "S3", "10.0.0.9:443": "S3", "127.0.0.1:8080": "ingress", "[::1]:8080": "ingress",
		"127.0.0.3:9090": "runner's health", "10.0.0.4:4223": "", "10.0.0.7:5432": "",
	} {
		err := r.Check(context.Background(), netip.MustParseAddrPort(addr))
		if what == "" && err != nil || what != "" && (err == nil || !strings.Contains(err.Error(), "gantry's own "+what)) {
			t.Errorf("%s: %v, want %q", addr, err, what)
		}
	}
}

// TestEgressAndNATSSettings: the operator's lists are read and bad entries
// refused naming their variable; NATS credentials come from one place, and
// a process given none reads gantry dev's from its data dir.
func TestEgressAndNATSSettings(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GANTRY_DATA_DIR", dir)
	t.Setenv("GANTRY_EGRESS_PRIVATE", "10.0.0.0/8, db.internal")
	t.Setenv("GANTRY_EGRESS_DENY", "10.1.2.3:8222,metadata.internal")
	c, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.EgressPrivate.String() != "10.0.0.0/8,db.internal" || len(c.EgressDeny) != 2 || c.EgressDeny[0].Port != 8222 {
		t.Errorf("lists: %v %+v", c.EgressPrivate, c.EgressDeny)
	}
	if !c.NATSAuth.Empty() {
		t.Errorf("NATS auth without any setting: %+v", c.NATSAuth)
	}
	if err := os.WriteFile(filepath.Join(dir, devNATSCredentials), []byte(`{"user":"gantry","password":"pw"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, _ = loadConfig(); c.NATSAuth != (queue.Auth{User: "gantry", Password: "pw"}) {
		t.Errorf("dev's NATS user not read: %+v", c.NATSAuth)
	}
	t.Setenv("GANTRY_NATS_URL", "nats://other:secret@127.0.0.1:4222")
	if c, _ = loadConfig(); !c.NATSAuth.Empty() {
		t.Errorf("a URL with a user still sent dev's: %+v", c.NATSAuth)
	}
	t.Setenv("GANTRY_NATS_TOKEN", "tok")
	t.Setenv("GANTRY_NATS_CREDS", filepath.Join(dir, "missing.creds"))
	t.Setenv("GANTRY_EGRESS_PRIVATE", "10.0.0.0/8:80")
	t.Setenv("GANTRY_EGRESS_DENY", "*.x.com")
	_, err = loadConfig()
	for _, name := range []string{"GANTRY_NATS_TOKEN and GANTRY_NATS_CREDS", "GANTRY_EGRESS_PRIVATE", "GANTRY_EGRESS_DENY"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("the error does not name %s: %v", name, err)
		}
	}
}
