// Package compat holds what gantry's compatible APIs share: the forms in
// which their clients can send an API key, and admission under load.
//
// Each compatible API is an adapter of its own over the service
// (ingress/service), as the HTTP API and MCP are, in a package below this
// one: sandboxfusion (SandboxFusion's /run_code, for verl and other RL
// harnesses), judge0 (Judge0 CE 1.13.1's /submissions) and piston (Piston
// v2's /api/v2/execute). They follow their originals field for field, not
// gantry's contract, so they are not in gantry's OpenAPI document; a
// submission through any of them is a gantry job of the caller's tenant.
//
// The clients of these APIs send keys as they can:
//
//   - Authorization: Bearer KEY;
//   - Authorization: Basic with the key as the password (what Python's
//     requests sends for http://user:KEY@host/...);
//   - X-Auth-Token: KEY (Judge0's header);
//   - in the path, /compat/key/KEY/<api>/..., for clients that can send
//     nothing else (piston-client, open-r1's Piston client, verl's URL).
//
// A key in a path must never reach a log or a metric: PathKeys takes it
// out of the request before anything else sees the request.
package compat

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// Prefix is where the compatible APIs are served: Prefix + <api> + "/...".
const Prefix = "/compat/"

// keyPrefix starts the path form of a key: /compat/key/KEY/<api>/...
const keyPrefix = Prefix + "key/"

type pathKey struct{}

// PathKeys takes a key sent in the path (/compat/key/KEY/<api>/...) out of
// the request: the request goes on as /compat/<api>/... with the key in
// its context, where Key finds it. Everything after it (the mux, logs,
// metrics, error messages) sees the path without the key. A path that
// starts the form but names no API is answered 404 here, without the key.
func PathKeys(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, keyPrefix)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		key, api, ok := strings.Cut(rest, "/")
		if !ok || key == "" || api == "" {
			http.Error(w, "404 page not found: "+keyPrefix+"KEY/<api>/... needs an API after the key", http.StatusNotFound)
			return
		}
		r2 := r.Clone(context.WithValue(r.Context(), pathKey{}, key))
		r2.URL.Path = Prefix + api
		r2.URL.RawPath = ""
		r2.RequestURI = r2.URL.RequestURI()
		next.ServeHTTP(w, r2)
	})
}

// Key is the API key the request carries, in any of the forms above ("":
// none). A key in the path wins, then Authorization, then X-Auth-Token.
func Key(r *http.Request) string {
	if k, ok := r.Context().Value(pathKey{}).(string); ok {
		return k
	}
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, cred, _ := strings.Cut(auth, " ")
		cred = strings.TrimSpace(cred)
		switch strings.ToLower(scheme) {
		case "bearer":
			return cred
		case "basic":
			raw, err := base64.StdEncoding.DecodeString(cred)
			if err != nil {
				return ""
			}
			_, password, _ := strings.Cut(string(raw), ":")
			return password
		}
		return ""
	}
	return strings.TrimSpace(r.Header.Get("X-Auth-Token"))
}

type arrival struct {
	source string
	at     time.Time
}

type arrivalKey struct{}

// Arrived is ctx carrying when a request arrived and the address its key
// attempts count against (the HTTP API's, behind trusted proxies), for
// Authenticate and ArrivedAt.
func Arrived(ctx context.Context, source string) context.Context {
	return context.WithValue(ctx, arrivalKey{}, arrival{source: source, at: time.Now()})
}

// Source is the address the request of ctx counts its key attempts
// against (Arrived), "" if not known.
func Source(ctx context.Context) string {
	a, _ := ctx.Value(arrivalKey{}).(arrival)
	return a.source
}

// ArrivedAt is when the request of ctx arrived (now, if not known): a
// client's time starts then, before any wait for admission.
func ArrivedAt(ctx context.Context) time.Time {
	if a, ok := ctx.Value(arrivalKey{}).(arrival); ok {
		return a.at
	}
	return time.Now()
}

// MaxAdmissionWait is how long a request of a compatible API waits for its
// tenant's request rate before it is refused: their clients send bursts
// (an RL step's 256 test cases at once) and do not retry 429.
const MaxAdmissionWait = 30 * time.Second

// Authenticate resolves the request's key to its tenant, waiting for the
// tenant's request rate rather than refusing a burst
// (service.AuthenticateWaiting). Errors are the service's (*service.Error),
// for the API to answer in its original's words.
func Authenticate(svc *service.Service, r *http.Request) (service.Principal, error) {
	a, _ := r.Context().Value(arrivalKey{}).(arrival)
	return svc.AuthenticateWaiting(r.Context(), Key(r), a.source, MaxAdmissionWait)
}

// TimeoutMS is a time limit given in seconds, held within what the policy
// allows (the originals take any; gantry keeps its bounds rather than
// refusing).
func TimeoutMS(seconds float64, p jobs.Policy) int {
	ms := math.Ceil(seconds * 1000)
	switch {
	case math.IsNaN(ms) || ms < 1:
		return 1
	case ms > float64(p.MaxTimeoutMS):
		return p.MaxTimeoutMS
	}
	return int(ms)
}

// MemoryMB is a memory limit in MiB held within what the policy allows.
func MemoryMB(mb int64, p jobs.Policy) int {
	return int(min(max(mb, int64(p.MinLimits.MemoryMB)), int64(p.MaxLimits.MemoryMB)))
}

// WriteJSON answers with v as JSON, HTML characters not escaped.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// Config is what every compatible API takes.
type Config struct {
	// MaxBodyBytes caps a request's body (413 beyond).
	MaxBodyBytes int64
}

// WithDefaults fills in zero fields.
func (c Config) WithDefaults() Config {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 10 << 20
	}
	return c
}

// HoldOutput holds, for the request of ctx, copies more of the jobs'
// output than the text and its JSON, which reading output from the object
// store held already (history.Output): what an API's answer makes of the
// output besides (a base64 of it, a second field holding it again). Its
// error is the service's (413, 429, 503).
func HoldOutput(ctx context.Context, copies float64, list ...jobs.Job) error {
	n := 0
	for _, j := range list {
		n += len(j.Stdout) + len(j.Stderr) + len(j.CompileOutput)
	}
	_, err := service.Hold(ctx, int64(float64(n)*copies))
	return err
}

// Handler serves a request of a compatible API for the caller p. An error
// it returns is answered in the API's own words.
type Handler func(w http.ResponseWriter, r *http.Request, p service.Principal) error

// Authenticated admits the request under its key (Authenticate) and calls
// h; answer words the error of either as the API's original would.
func Authenticated(svc *service.Service, h Handler, answer func(http.ResponseWriter, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := Authenticate(svc, r)
		if err == nil {
			err = h(w, r, p)
		}
		if err != nil {
			answer(w, err)
		}
	})
}

// ServiceError is err as the service words it, for an API to answer in its
// original's words: nil when the client went away (there is no one to
// answer). An internal error is logged, not shown; an error with a
// Retry-After has it set on w.
func ServiceError(w http.ResponseWriter, log *slog.Logger, err error) *service.Error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	e, internal := service.ToError(err)
	if internal {
		log.Error("request failed", "err", err)
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	return e
}
