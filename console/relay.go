package console

import (
	"bytes"
	"net/http"

	"github.com/gantryhq/gantry/localapi"
)

// relay serves an API request straight to the browser (streams, downloads,
// redirects), setting extra headers only on success; an API error is shown
// as a console page with the API's message instead.
func (c *Console) relay(w http.ResponseWriter, r *http.Request, s *session, req *http.Request, extra http.Header) {
	cw := &catcher{w: w, extra: extra}
	s.api.Serve(cw, req)
	if cw.failed {
		resp := &localapi.Response{Status: cw.status, Body: cw.buf.Bytes()}
		w.Header().Del("Content-Type")
		w.Header().Del("Content-Length")
		c.fail(w, r, s, resp.Err())
	}
}

// catcher passes a successful answer through and holds back a failed one.
type catcher struct {
	w      http.ResponseWriter
	extra  http.Header
	status int
	wrote  bool
	failed bool
	buf    bytes.Buffer
}

func (c *catcher) Header() http.Header { return c.w.Header() }

func (c *catcher) WriteHeader(code int) {
	if c.wrote {
		return
	}
	c.wrote, c.status = true, code
	if code >= 400 {
		c.failed = true
		return
	}
	for k, v := range c.extra {
		c.w.Header()[k] = v
	}
	c.w.WriteHeader(code)
}

func (c *catcher) Write(p []byte) (int, error) {
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	if c.failed {
		if c.buf.Len() < 64<<10 {
			c.buf.Write(p)
		}
		return len(p), nil
	}
	return c.w.Write(p)
}

// Flush passes flushes through, for event streams.
func (c *catcher) Flush() {
	if !c.failed {
		_ = http.NewResponseController(c.w).Flush()
	}
}
