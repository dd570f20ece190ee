package main

import (
	"crypto/rand"
	"log/slog"
	"net/http"
	"time"

	"github.com/gantryhq/gantry/chat"
	"github.com/gantryhq/gantry/console"
	"github.com/gantryhq/gantry/ingress/httpapi"
	"github.com/gantryhq/gantry/secret"
)

// newChat makes the agent loop when a model is configured; without
// GANTRY_LLM_URL it returns nil and the agent's route says how to set one.
func newChat(cfg config, log *slog.Logger) (httpapi.Chat, error) {
	if cfg.LLMURL == "" {
		return nil, nil
	}
	a, err := chat.New(chat.Config{
		URL: cfg.LLMURL, Model: cfg.LLMModel, APIKey: cfg.LLMAPIKey, MaxSteps: cfg.LLMMaxSteps, Timeout: cfg.LLMTimeout,
		RunTimeout: cfg.LLMRunTimeout, MaxTokens: cfg.LLMMaxTokens,
	}, log.With("component", "agent"))
	if err != nil {
		return nil, err
	}
	return a, nil
}

// withConsole serves the web console next to the API (api), unless
// GANTRY_CONSOLE=false.
func withConsole(cfg config, log *slog.Logger, api http.Handler) (http.Handler, error) {
	if !cfg.Console {
		return api, nil
	}
	// Sign-ins are sealed under the secret key, so that every ingress
	// that shares it accepts them; without one, under a key of this
	// process (sign-ins then end when it restarts).
	key := cfg.SecretKey
	if key == nil {
		key = make([]byte, secret.KeySize)
		_, _ = rand.Read(key)
		log.Info("GANTRY_SECRET_KEY is not set: console sign-ins last until this process stops, and work only on this ingress")
	}
	var origins []string
	if cfg.S3.PublicEndpoint != "" {
		origins = append(origins, cfg.S3.PublicEndpoint)
	} else if cfg.S3.Endpoint != "" {
		origins = append(origins, cfg.S3.Endpoint)
	}
	model := ""
	if cfg.LLMURL != "" {
		model = cfg.LLMModel
	}
	c, err := console.New(console.Config{
		SessionKey: key, SessionTTL: 12 * time.Hour, ImageOrigins: origins, Model: model, Version: version,
		Guard: func(h http.Handler) http.Handler { return httpapi.BodyDeadline(cfg.BodyTimeout, h) },
	}, log.With("component", "console"), api)
	if err != nil {
		return nil, err
	}
	return c.Handler(), nil
}
