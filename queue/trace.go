package queue

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/gantryhq/gantry/tracing"
)

// A run message carries the trace of its job in its headers, as W3C trace
// context (traceparent, tracestate): the runner that takes the message
// makes its spans children of the span that published it, so a job's
// publish and every attempt at it are one trace.

// headerCarrier lets the propagator read and write a message's headers,
// under the header names W3C trace context gives them.
type headerCarrier nats.Header

func (h headerCarrier) Get(key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (h headerCarrier) Set(key, value string) { h[key] = []string{value} }

func (h headerCarrier) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// injectTrace puts the trace of the span in ctx into a message's headers;
// it adds nothing when ctx has no span (tracing off).
func injectTrace(ctx context.Context, m *nats.Msg) {
	h := headerCarrier{}
	tracing.Inject(ctx, h)
	if len(h) == 0 {
		return
	}
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	for k, v := range h {
		m.Header[k] = v
	}
}

// TraceContext returns ctx with the span that published a message (its
// headers) as the remote parent of what is done for it; ctx as it is when
// the message carries no trace.
func TraceContext(ctx context.Context, header nats.Header) context.Context {
	if len(header) == 0 {
		return ctx
	}
	return tracing.Extract(ctx, headerCarrier(header))
}
