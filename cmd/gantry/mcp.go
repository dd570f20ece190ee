package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/gantryhq/gantry/mcpproxy"
)

// runMCP serves MCP on stdin/stdout, forwarding to the gantry at GANTRY_URL.
// Only protocol messages go to stdout; diagnostics go to stderr.
func runMCP(ctx context.Context) error {
	base := strings.TrimRight(os.Getenv("GANTRY_URL"), "/")
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	key := os.Getenv("GANTRY_API_KEY")
	if key == "" {
		return errors.New("GANTRY_API_KEY must be set to a gantry API key (gantry keys create TENANT)")
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
