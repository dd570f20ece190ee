package main

import (
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/egress"
	"github.com/gantryhq/gantry/queue"
)

// reservedEndpoints is every service of gantry's this process knows of,
// which jobs' egress never reaches: NATS (the configured servers and those
// the connection discovered), Postgres (every host of the URL), S3 (the
// endpoint and the public one), the ingress (GANTRY_ADDR) and the runner's
// health and metrics listener, and what the operator adds
// (GANTRY_EGRESS_DENY). Unparseable settings were refused at start; one
// this cannot read adds nothing (its engine is then unreachable to gantry
// too).
func reservedEndpoints(cfg config, nc *nats.Conn) *egress.Reserved {
	var eps []egress.Endpoint
	add := func(what, hostport string) {
		if e, err := egress.ParseEndpoint(what, hostport); err == nil {
			eps = append(eps, e)
		}
	}
	for _, hp := range queue.HostPorts(cfg.NATSURL) {
		add("NATS", hp)
	}
	if pc, err := pgconn.ParseConfig(cfg.DatabaseURL); err == nil {
		hosts := []*pgconn.FallbackConfig{{Host: pc.Host, Port: pc.Port}}
		hosts = append(hosts, pc.Fallbacks...)
		for _, h := range hosts {
			if h.Host != "" && !strings.HasPrefix(h.Host, "/") { // not a unix socket
				eps = append(eps, egress.Endpoint{What: "Postgres", Host: h.Host, Port: int(h.Port)})
			}
		}
	}
	for _, e := range []string{cfg.S3.Endpoint, cfg.S3.PublicEndpoint} {
		if hp := urlHostPort(e); hp != "" {
			add("S3", hp)
		}
	}
	add("ingress", cfg.Addr)
	if cfg.RunnerAddr != "" {
		add("runner's health and metrics listener", cfg.RunnerAddr)
	}
	eps = append(eps, cfg.EgressDeny...)
	var more func() []egress.Endpoint
	if nc != nil {
		more = func() []egress.Endpoint {
			var out []egress.Endpoint
			for _, hp := range queue.HostPorts(strings.Join(nc.Servers(), ",")) {
				if e, err := egress.ParseEndpoint("NATS", hp); err == nil {
					out = append(out, e)
				}
			}
			return out
		}
	}
	return egress.NewReserved(eps, more)
}

// urlHostPort is an http(s) URL's host:port, its scheme's port when it
// names none ("" if it is not such a URL).
func urlHostPort(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = strconv.Itoa(map[string]int{"http": 80, "https": 443}[u.Scheme])
		if port == "0" {
			return ""
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}
