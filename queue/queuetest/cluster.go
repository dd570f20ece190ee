package queuetest

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is a NATS JetStream cluster of in-process servers on this
// machine, as a multi-node deployment runs it: every node routes to every
// other. Nodes start only when asked, so a test can show what happens
// before the cluster has a quorum.
type Cluster struct {
	t     testing.TB
	opts  []*server.Options
	nodes []*server.Server
}

// NewCluster configures an n-node cluster (ports chosen now, nothing
// started). Started nodes shut down when the test ends.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	ports := freePorts(t, 2*n) // distinct: held together while chosen
	clientPorts, routePorts := ports[:n], ports[n:]
	c := &Cluster{t: t, nodes: make([]*server.Server, n)}
	for i := range n {
		var routes []string
		for j := range n {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", routePorts[j]))
			}
		}
		c.opts = append(c.opts, &server.Options{
			ServerName: fmt.Sprintf("gantry-test-%d", i+1),
			Host:       "127.0.0.1",
			Port:       clientPorts[i],
			JetStream:  true,
			StoreDir:   t.TempDir(),
			Cluster:    server.ClusterOpts{Name: "gantry-test", Host: "127.0.0.1", Port: routePorts[i]},
			Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
			NoSigs:     true,
			NoLog:      true,
			MaxPayload: 8 << 20,
		})
	}
	t.Cleanup(func() {
		for _, ns := range c.nodes {
			if ns != nil {
				ns.Shutdown()
				ns.WaitForShutdown()
			}
		}
	})
	return c
}

// Start starts node i (0-based) and waits until it accepts clients.
func (c *Cluster) Start(i int) *server.Server {
	c.t.Helper()
	ns, err := server.NewServer(c.opts[i])
	if err != nil {
		c.t.Fatalf("nats node %d: %v", i+1, err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		c.t.Fatalf("nats node %d did not start", i+1)
	}
	c.nodes[i] = ns
	return ns
}

// Stop shuts node i down (its data stays, for a later Start).
func (c *Cluster) Stop(i int) {
	if ns := c.nodes[i]; ns != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
		c.nodes[i] = nil
	}
}

// StartAll starts every node not yet started.
func (c *Cluster) StartAll() {
	c.t.Helper()
	for i, ns := range c.nodes {
		if ns == nil {
			c.Start(i)
		}
	}
}

// URL is every node's client URL, comma-separated: what GANTRY_NATS_URL
// takes.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.opts))
	for i, o := range c.opts {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", o.Port)
	}
	return strings.Join(urls, ",")
}

// Ports is every port the nodes bind (clients' and routes'), chosen and
// free when the cluster was made: a test that picks another port to bind
// later keeps clear of them.
func (c *Cluster) Ports() []int {
	var ports []int
	for _, o := range c.opts {
		ports = append(ports, o.Port, o.Cluster.Port)
	}
	return ports
}

// freePorts finds n distinct ports free now. They are released before the servers
// bind them; on a test machine nothing else takes them in between.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}
