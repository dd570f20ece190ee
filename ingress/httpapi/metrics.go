package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantryhq/gantry/tracing"
)

type metrics struct {
	requests *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gantry_http_request_seconds",
			Help:    "HTTP API requests by route and status code.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "code"}),
	}
	reg.MustRegister(m.requests)
	return m
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush on the real writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (s *Server) instrument(route string, next http.Handler) http.Handler {
	// The span is named for the route, never the path: ids (and whatever
	// a client puts in a path) stay out of span names.
	name := route
	if !strings.Contains(route, " ") {
		name = ""
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		spanName := name
		if spanName == "" {
			spanName = r.Method + " " + route
		}
		// A request that arrives with a W3C traceparent continues the
		// caller's trace; its job's spans are then in it.
		ctx, span := s.tracer.Start(tracing.Extract(r.Context(), propagation.HeaderCarrier(r.Header)), spanName,
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", route)))
		defer span.End()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(ctx))
		if rec.code == 0 {
			rec.code = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", rec.code))
		if rec.code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(rec.code))
		}
		s.metrics.requests.WithLabelValues(route, strconv.Itoa(rec.code)).Observe(time.Since(start).Seconds())
		s.log.Debug("request", append([]any{"method", r.Method, "path", r.URL.Path, "status", rec.code, "duration", time.Since(start)},
			tracing.LogAttrs(ctx)...)...)
	})
}

// Flush passes flushes through, for streaming responses.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
