package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// api is the HTTP API as the people commands use it: JSON in and out, the
// API's error body turned into apiError, a failure to connect into a
// message that says what to check, and idempotent calls retried.
type api struct {
	base       string // without a trailing slash
	key        string
	configPath string // named in messages about the URL and key
	http       *http.Client
	// retries is how many times an idempotent call is tried again after
	// a connection failure, 429, 502, 503 or 504.
	retries int
}

// apiError is the API's error body.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func (e *apiError) Error() string { return e.Message }

// connError is a server that could not be reached.
type connError struct {
	base, configPath string
	err              error
}

func (e *connError) Error() string {
	hint := ""
	if errors.Is(e.err, syscall.ECONNREFUSED) {
		hint = "is it running? "
	}
	return fmt.Sprintf("cannot reach gantry at %s: %v (%sset GANTRY_URL, or \"url\" in %s)", e.base, rootCause(e.err), hint, e.configPath)
}

func (e *connError) Unwrap() error { return e.err }

// rootCause drops the URL and the addresses from a transport error (the
// message names the URL already).
func rootCause(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// request is one call.
type request struct {
	method, path string
	query        url.Values
	body         []byte
	contentType  string
	accept       string
	// idempotent calls are retried (GET, DELETE, PUT, and POSTs that are
	// idempotent by their nature or by an idempotency key).
	idempotent bool
}

// do makes the call and returns the successful response (its body for the
// caller to read and close).
func (a *api) do(ctx context.Context, r request) (*http.Response, error) {
	u := a.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	for try := 0; ; try++ {
		var body io.Reader
		if r.body != nil {
			body = bytes.NewReader(r.body)
		}
		req, err := http.NewRequestWithContext(ctx, r.method, u, body)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+a.key)
		req.Header.Set("User-Agent", "gantry-cli/"+version)
		if r.contentType != "" {
			req.Header.Set("Content-Type", r.contentType)
		}
		if r.accept != "" {
			req.Header.Set("Accept", r.accept)
		}
		resp, err := a.http.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// A refused connection is retried briefly (a restarting
			// ingress), not as long as a busy one.
			if r.idempotent && try < min(a.retries, 2) {
				if sleep(ctx, backoff(try, 0)) == nil {
					continue
				}
			}
			return nil, &connError{base: a.base, configPath: a.configPath, err: err}
		}
		if resp.StatusCode < 300 {
			return resp, nil
		}
		e := readAPIError(resp)
		retryable := resp.StatusCode == 429 || resp.StatusCode == 502 || resp.StatusCode == 503 || resp.StatusCode == 504
		if r.idempotent && retryable && try < a.retries {
			if sleep(ctx, backoff(try, retryAfter(resp))) == nil {
				continue
			}
		}
		if e.Status == http.StatusUnauthorized {
			return nil, fmt.Errorf("the API key was refused: %s (set GANTRY_API_KEY, or \"api_key\" in %s)", e.Message, a.configPath)
		}
		return nil, e
	}
}

// readAPIError reads and closes an error response.
func readAPIError(resp *http.Response) *apiError {
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(data, &body) != nil || body.Error == nil || body.Error.Message == "" {
		text := strings.TrimSpace(string(data))
		if len(text) > 200 {
			text = text[:200] + "…"
		}
		return &apiError{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode),
			Message: fmt.Sprintf("HTTP %s from the server (is GANTRY_URL a gantry?) %s", resp.Status, text)}
	}
	body.Error.Status = resp.StatusCode
	return body.Error
}

func retryAfter(resp *http.Response) time.Duration {
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		return min(time.Duration(s)*time.Second, time.Minute)
	}
	return 0
}

// backoff is the wait before retry n+1: Retry-After when the server gave
// one, else 0.5 s doubling, with jitter.
func backoff(n int, after time.Duration) time.Duration {
	if after > 0 {
		return after
	}
	d := 500 * time.Millisecond << min(n, 5)
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// json makes a call and decodes its JSON answer into out (nil: discard).
func (a *api) json(ctx context.Context, r request, in, out any) error {
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		r.body, r.contentType = b, "application/json"
	}
	resp, err := a.do(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return &connError{base: a.base, configPath: a.configPath, err: err}
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = data
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("unexpected answer from %s %s: %v", r.method, r.path, err)
	}
	return nil
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data []byte
}

// events reads server-sent events from a stream until it ends, calling fn
// for each; fn's error stops the reading.
func events(r io.Reader, fn func(sseEvent) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 32<<20)
	var ev sseEvent
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		switch {
		case line == "":
			if ev.name != "" || ev.data != nil {
				if err := fn(ev); err != nil {
					return err
				}
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			ev.name = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			d := strings.TrimPrefix(line[len("data:"):], " ")
			if ev.data != nil {
				ev.data = append(ev.data, '\n')
			}
			ev.data = append(ev.data, d...)
		}
	}
	return sc.Err()
}
