package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"

	"github.com/gantryhq/gantry/mcpproxy"
)

// runMCP serves MCP on stdin/stdout, forwarding to the gantry at GANTRY_URL.
// Only protocol messages go to stdout; diagnostics go to stderr.
func runMCP(ctx context.Context) error {
	base, key, _, err := clientConfig()
	if err != nil {
		return err
	}
	p := &mcpproxy.Proxy{
		Endpoint: base + "/mcp",
		APIKey:   key,
		Toolsets: os.Getenv("GANTRY_MCP_TOOLSETS"),
		Client:   &http.Client{},
		Log:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	return p.Run(ctx, os.Stdin, os.Stdout)
}
