package storetest

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
)

// QueryLog records the statements a store New made runs for a context
// that carries it (WithQueryLog), so that tests can check their plans
// against a large table.
type QueryLog struct {
	mu         sync.Mutex
	statements []Statement
}

// Statement is one statement the store ran, with its arguments.
type Statement struct {
	SQL  string
	Args []any
}

// Statements returns what was recorded so far.
func (l *QueryLog) Statements() []Statement {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Statement(nil), l.statements...)
}

type queryLogKey struct{}

// WithQueryLog returns a context whose statements are recorded in l.
func WithQueryLog(ctx context.Context, l *QueryLog) context.Context {
	return context.WithValue(ctx, queryLogKey{}, l)
}

// queryTracer is the tracer of the stores New makes: it records statements
// in the context's QueryLog, if any.
type queryTracer struct{}

func (queryTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if l, ok := ctx.Value(queryLogKey{}).(*QueryLog); ok {
		l.mu.Lock()
		l.statements = append(l.statements, Statement{SQL: data.SQL, Args: data.Args})
		l.mu.Unlock()
	}
	return ctx
}

func (queryTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
