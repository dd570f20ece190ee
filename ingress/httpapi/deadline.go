package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/gantryhq/gantry/ingress/service"
)

// BodyDeadline gives a request's body timeout to arrive (0: no limit): a
// client that sends it slowly, or stops, gets a 408 error from Read and
// its connection closed instead of holding a connection and a handler for
// as long as it likes. The deadline covers the body only: it is lifted as
// soon as the body has been read, so long polls, event streams and MCP
// streams (which are responses) are not cut. http.Server's ReadTimeout
// cannot do this: it also ends the request's context while the response
// is still streaming. The API's handler has it; handlers served beside the
// API (the web console) take it from here.
func BodyDeadline(timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || timeout <= 0 {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			next.ServeHTTP(w, r) // a writer without a connection (tests)
			return
		}
		r.Body = &deadlineBody{ReadCloser: r.Body, w: w, rc: rc, timeout: timeout}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline when the body ends, and turns the
// deadline passing into a 408.
type deadlineBody struct {
	io.ReadCloser
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	done    bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF && !b.done:
		// The server now reads ahead on the connection to notice the
		// client leaving; that read must not hit the deadline.
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.w.Header().Set("Connection", "close")
		return n, &service.Error{Status: http.StatusRequestTimeout, Code: service.CodeRequestTimeout,
			Message: fmt.Sprintf("the request body did not arrive within %s", b.timeout)}
	}
	return n, err
}
