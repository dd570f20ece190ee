// Package localapi calls gantry's HTTP API in-process, through the ingress's
// own handler, as the tenant whose API key it holds. The web console and the
// agent loop use it, so they act with exactly the rights, checks, quotas and
// error messages of any HTTP client, without a network hop and without a
// second implementation of what the API does.
package localapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client calls the API as one tenant. It is cheap: make one per request.
type Client struct {
	api http.Handler
	key string
}

// New returns a client that serves its calls with api (the ingress's
// handler) under the API key key.
func New(api http.Handler, key string) *Client { return &Client{api: api, key: key} }

// Error is an API error answer: its status and the body's error object.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// Response is a buffered API answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// Cut: Body is the first bytes of a longer answer (DoLimited).
	Cut bool
}

// Err returns the answer's error, or nil for a 1xx–3xx status.
func (r *Response) Err() error {
	if r.Status < 400 {
		return nil
	}
	var body struct {
		Error *Error `json:"error"`
	}
	if json.Unmarshal(r.Body, &body) != nil || body.Error == nil || body.Error.Message == "" {
		return &Error{Status: r.Status, Code: "internal", Message: fmt.Sprintf("the API answered %d %s", r.Status, http.StatusText(r.Status))}
	}
	body.Error.Status = r.Status
	return body.Error
}

// Request makes the API request for method and path (with its query), body
// and content type, carrying the client's key. The caller serves it with
// Serve or Do.
func (c *Client) Request(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Request, error) {
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("api path %q is not absolute", path)
	}
	u, err := url.ParseRequestURI(path)
	if err != nil {
		return nil, fmt.Errorf("api path %q: %w", path, err)
	}
	if body == nil {
		body = http.NoBody
	}
	r, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	r.RequestURI = u.RequestURI()
	r.RemoteAddr = "127.0.0.1:0" // in-process
	r.Header.Set("Authorization", "Bearer "+c.key)
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	return r, nil
}

// Serve serves r, made by Request, straight to w: for streams (server-sent
// events) and downloads, which the API writes as they come.
func (c *Client) Serve(w http.ResponseWriter, r *http.Request) { c.api.ServeHTTP(w, r) }

// Do makes and serves a request, buffering the answer. A non-nil error is
// only a request that could not be made; the API's own errors are in the
// response (see Response.Err).
func (c *Client) Do(ctx context.Context, method, path string, body io.Reader, contentType string) (*Response, error) {
	return c.DoLimited(ctx, method, path, body, contentType, 0)
}

// DoLimited is Do keeping at most limit bytes of the answer's body (0: no
// limit): the rest is not read (the API's request is cancelled), and the
// response says it was cut. For answers a caller shows only the start of (a file), which
// must not be held in memory whole.
func (c *Client) DoLimited(ctx context.Context, method, path string, body io.Reader, contentType string, limit int) (*Response, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r, err := c.Request(ctx, method, path, body, contentType)
	if err != nil {
		return nil, err
	}
	rec := &recorder{header: http.Header{}, limit: limit, full: cancel}
	func() {
		defer func() {
			// The handler aborts the answer it could not finish once its
			// request was cancelled: the cut this client asked for.
			if v := recover(); v != nil && (v != http.ErrAbortHandler || !rec.cut) {
				panic(v)
			}
		}()
		c.api.ServeHTTP(rec, r)
	}()
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &Response{Status: rec.status, Header: rec.header, Body: rec.body.Bytes(), Cut: rec.cut}, nil
}

// JSON calls method path with in (nil: no body) as JSON and decodes a
// successful answer into out (nil: ignored). An API error is returned as
// an *Error.
func (c *Client) JSON(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	ctype := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ctype = bytes.NewReader(b), "application/json"
	}
	resp, err := c.Do(ctx, method, path, body, ctype)
	if err != nil {
		return err
	}
	if err := resp.Err(); err != nil {
		return err
	}
	if out == nil || resp.Status == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return fmt.Errorf("decode the answer of %s %s: %w", method, path, err)
	}
	return nil
}

// AsError returns err as an API error: itself when it is one, else an
// internal error carrying its message.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Status: http.StatusInternalServerError, Code: "internal", Message: err.Error()}
}

// PathEscape escapes each segment of a slash-separated path for a URL.
func PathEscape(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// recorder buffers an answer in memory: all of it, or (limit > 0) its
// first limit bytes, calling full once more arrive.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	limit  int
	cut    bool
	full   func()
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.limit > 0 && r.body.Len()+len(p) > r.limit {
		// Keep what fits and take the rest without keeping it: an error
		// here would abort the handler before the cut is recorded.
		r.body.Write(p[:r.limit-r.body.Len()])
		if !r.cut {
			r.cut = true
			r.full()
		}
		return len(p), nil
	}
	return r.body.Write(p)
}

// Flush does nothing: the answer is read when the handler returns.
func (r *recorder) Flush() {}
