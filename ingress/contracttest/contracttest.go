// Package contracttest checks HTTP traffic against gantry's OpenAPI
// document (ingress/openapi.json) with kin-openapi's openapi3filter, for
// tests: the ingress tests wrap their server in Handler, the end-to-end
// tests put it in front of gantry dev for the client libraries' tests.
package contracttest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

func init() {
	// Bodies that are not JSON: validated as strings (their schemas say
	// only that).
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
	openapi3filter.RegisterBodyDecoder("text/markdown", openapi3filter.PlainBodyDecoder)
	openapi3filter.RegisterBodyDecoder("application/zip", openapi3filter.FileBodyDecoder)
	openapi3filter.RegisterBodyDecoder("application/x-tar", openapi3filter.FileBodyDecoder)
}

type contractDoc struct {
	doc    *openapi3.T
	router routers.Router
}

var loadContract = sync.OnceValues(func() (*contractDoc, error) {
	loader := openapi3.NewLoader()
	_, file, _, _ := runtime.Caller(0)
	doc, err := loader.LoadFromFile(filepath.Join(filepath.Dir(file), "..", "openapi.json"))
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, err
	}
	// The router matches the request's path only (servers: "/").
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &contractDoc{doc: doc, router: router}, nil
})

// exercised records the operations called through any Handler of the
// process, by operationId.
var exercised sync.Map

// Handler wraps an HTTP API handler (or a proxy to one): each request the
// document describes is served, then checked. A request the server accepted (2xx)
// must be one the document allows; every answer must be one the document
// lists for the operation, with headers and a body of its schema (and for
// an event stream, each event's data of its event's schema).
func Handler(t testing.TB, next http.Handler) http.Handler {
	c, err := loadContract()
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, params, err := c.router.FindRoute(routable(r))
		if err != nil { // not the HTTP API's (/mcp, a path that is no route)
			next.ServeHTTP(w, r)
			return
		}
		// The body is kept as the handler reads it (reading it first would
		// change how slow bodies are handled).
		var body bytes.Buffer
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = teeBody{Reader: io.TeeReader(r.Body, &body), Closer: r.Body}
		}
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		exercised.Store(route.Operation.OperationID, true)

		where := fmt.Sprintf("%s %s → %d", r.Method, r.URL.RequestURI(), rec.status())
		check := r.Clone(context.Background())
		check.Body = io.NopCloser(bytes.NewReader(body.Bytes()))
		if body.Len() > 0 && check.Header.Get("Content-Type") == "" {
			check.Header.Set("Content-Type", defaultMediaType(route))
		}
		in := &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
				IncludeResponseStatus: true, MultiError: true}}
		if rec.status()/100 == 2 {
			if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
				t.Errorf("contract: %s: the server accepted a request the document refuses: %v", where, err)
			}
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.status(),
			Header: rec.Header(), Body: io.NopCloser(bytes.NewReader(rec.body.Bytes())), Options: in.Options}
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			t.Errorf("contract: %s: the answer breaks the document: %v\nbody: %.2000s", where, err, rec.body.String())
		}
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") && rec.status() == http.StatusOK {
			if err := c.checkEvents(route, rec.body.Bytes()); err != nil {
				t.Errorf("contract: %s: %v", where, err)
			}
		}
	})
}

// defaultMediaType is what the server takes a body without a Content-Type
// for: the operation's one media type, else JSON.
func defaultMediaType(route *routers.Route) string {
	if rb := route.Operation.RequestBody; rb != nil && len(rb.Value.Content) == 1 {
		for mt := range rb.Value.Content {
			return mt
		}
	}
	return "application/json"
}

// tailPath matches the paths of the routes whose last parameter takes the
// rest of the path ({path...} in the mux, {path} in the document).
var tailPath = regexp.MustCompile(`^(/v1/jobs/[^/]+/artifacts/|/v1/sessions/[^/]+/files/)(.+)$`)

// routable is r as the document's router can match it: the slashes of a
// tail parameter escaped, since a path parameter of OpenAPI holds none.
func routable(r *http.Request) *http.Request {
	m := tailPath.FindStringSubmatch(r.URL.EscapedPath())
	if m == nil {
		return r
	}
	rr := r.Clone(r.Context())
	rr.URL.RawPath = m[1] + strings.ReplaceAll(m[2], "/", "%2F")
	return rr
}

// checkEvents validates each event of a stream against the schema the
// document gives its name (x-sse-events; an event without an `event:` line
// is a "message", as in EventSource). The data x-sse-end names (OpenAI's
// "[DONE]") ends the stream and is no JSON.
func (c *contractDoc) checkEvents(route *routers.Route, stream []byte) error {
	media := route.Operation.Responses.Status(http.StatusOK).Value.Content.Get("text/event-stream")
	events, _ := media.Extensions["x-sse-events"].(map[string]any)
	end, _ := media.Extensions["x-sse-end"].(string)
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(nil, 16<<20)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			name = ""
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case end != "" && line == "data: "+end:
		case strings.HasPrefix(line, "data: "):
			if name == "" {
				name = "message"
			}
			ref, _ := events[name].(map[string]any)["$ref"].(string)
			schema := c.doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
			if schema == nil {
				return fmt.Errorf("event %q is not in the document's x-sse-events", name)
			}
			var v any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &v); err != nil {
				return fmt.Errorf("event %q: data is not JSON: %v", name, err)
			}
			if err := schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
				return fmt.Errorf("event %q: %v", name, err)
			}
		}
	}
	return sc.Err()
}

type teeBody struct {
	io.Reader
	io.Closer
}

// recorder passes an answer through and keeps a copy.
type recorder struct {
	http.ResponseWriter
	code int
	body bytes.Buffer
}

func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes of
// event streams, deadlines of long polls).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unexercised lists the document's operations no Handler of the process
// has seen a request of ("METHOD path (operationId)"), sorted.
func Unexercised() ([]string, error) {
	c, err := loadContract()
	if err != nil {
		return nil, err
	}
	var missing []string
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			if _, ok := exercised.Load(op.OperationID); !ok {
				missing = append(missing, fmt.Sprintf("%s %s (%s)", method, path, op.OperationID))
			}
		}
	}
	sort.Strings(missing)
	return missing, nil
}

// Exercised reports whether any Handler of the process saw a request.
func Exercised() bool {
	n := 0
	exercised.Range(func(any, any) bool { n++; return false })
	return n > 0
}
