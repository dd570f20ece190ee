// Command gantry runs code for AI agents: the ingress (HTTP API), the
// runners, a single-machine dev mode, and operator commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `gantry runs code for AI agents.

Usage: gantry <command> [arguments]

Services:
  dev        ingress + runner in one process, with embedded NATS and S3
  ingress    the HTTP API (needs NATS, Postgres, S3)
  runner     runs jobs in Docker (needs NATS, Postgres, S3, Docker)
  mcp        MCP over stdio, forwarded to the gantry at GANTRY_URL (key: GANTRY_API_KEY)

Operators:
  migrate                         apply database migrations
  tenants create NAME             create a tenant
  tenants list                    list tenants and their quotas
  tenants set-limits TENANT [--rps N] [--max-queued N] [--max-running N]
                                  set a tenant's quotas (N or "default")
  keys create TENANT [LABEL]      create an API key (printed once)
  keys list TENANT                list a tenant's keys
  keys revoke KEY_ID              revoke a key
  environments add NAME IMAGE [--description TEXT] [--tenant TENANT]... [--no-check]
                                  register an environment: a sandbox image derived from
                                  gantry's (checked here: pulled if a registry serves it,
                                  its agent must answer)
  environments list               list environments
  environments remove NAME        remove one
  version                         print the version
  probe URL                       GET URL; exit 0 on a 2xx (a container health check
                                  for images without curl)

Configuration is read from GANTRY_* environment variables; see README.md.
` + peopleUsage

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		var exit *exitError
		var use *usageError
		switch {
		case errors.As(err, &exit):
			if exit.msg != "" {
				fmt.Fprintln(os.Stderr, "gantry:", exit.msg)
			}
			os.Exit(exit.code)
		case errors.As(err, &use):
			fmt.Fprintf(os.Stderr, "gantry: %s\n\n%s", use.msg, use.usage)
			os.Exit(2)
		}
		if errors.Is(err, errUsage) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "gantry:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errUsage
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "version", "--version":
		fmt.Println("gantry", version)
		return nil
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	case "mcp":
		return runMCP(ctx)
	case "run", "jobs", "sessions", "skills":
		return runPeople(ctx, cmd, args)
	case "probe":
		if len(args) != 1 {
			return errUsage
		}
		return probe(ctx, args[0])
	}
	switch cmd {
	case "dev", "ingress", "runner", "migrate":
		// The services are configured by GANTRY_* variables alone: an
		// argument (a --help) must not start one.
		if len(args) > 0 {
			if slices.Contains([]string{"help", "-h", "-help", "--help"}, args[0]) {
				fmt.Print(usage)
				return nil
			}
			return &usageError{msg: fmt.Sprintf("`gantry %s` takes no arguments: it is configured by GANTRY_* environment variables (see the README)", cmd), usage: usage}
		}
	}
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	switch cmd {
	case "dev", "runner":
		if cmd == "dev" && !cfg.DevRunner {
			break
		}
		if handled, err := privateMounts(cfg); handled {
			return err
		}
	}
	switch cmd {
	case "dev":
		return runDev(ctx, cfg)
	case "ingress":
		return runIngress(ctx, cfg)
	case "runner":
		return runRunner(ctx, cfg)
	case "migrate":
		return runMigrate(ctx, cfg)
	case "tenants":
		return runTenants(ctx, cfg, args)
	case "keys":
		return runKeys(ctx, cfg, args)
	case "environments":
		return runEnvironments(ctx, cfg, args)
	}
	return errUsage
}
