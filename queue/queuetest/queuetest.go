// Package queuetest starts a real NATS JetStream server in-process for tests,
// on a random port with its store in a temporary directory.
package queuetest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/devstack"
)

// Server starts a JetStream server that shuts down when the test ends.
func Server(t testing.TB) *server.Server {
	t.Helper()
	ns, err := devstack.StartNATS(t.TempDir(), "127.0.0.1:0", devstack.NATSCredentials{})
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

// Connect connects to ns; the connection closes when the test ends.
func Connect(t testing.TB, ns *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatalf("connect to nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}
