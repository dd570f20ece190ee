package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Each tenant has a subject and a durable pull consumer of its own on the
// job stream: runners take from the tenants' queues in turn, so that one
// tenant's backlog cannot hold back another's jobs, and a queue's max ack
// pending is the tenant's cap on running jobs, enforced by JetStream.

// TenantSubject is the subject of a tenant's run messages.
func TenantSubject(tenantID string) string { return "gantry.jobs.tenant." + tenantID }

// TenantConsumerPrefix starts the name of every tenant's consumer.
const TenantConsumerPrefix = "tenant-"

// TenantConsumer names the consumer of a tenant's run messages.
func TenantConsumer(tenantID string) string { return TenantConsumerPrefix + tenantID }

// TenantOfConsumer returns the tenant whose consumer this is ("" for any
// other consumer).
func TenantOfConsumer(name string) string {
	id, _ := strings.CutPrefix(name, TenantConsumerPrefix)
	if id == name {
		return ""
	}
	return id
}

// TenantOfSubject returns the tenant of a TenantSubject ("" for any other
// subject).
func TenantOfSubject(subject string) string {
	id, _ := strings.CutPrefix(subject, "gantry.jobs.tenant.")
	if id == subject {
		return ""
	}
	return id
}

// tenantQueueIdle is how long a tenant's consumer may go unused before
// JetStream removes it (a publish or a runner makes it again). Messages
// stay in the stream meanwhile.
const tenantQueueIdle = time.Hour

// EnsureTenant creates or updates a tenant's consumer with its cap on
// running jobs (< 1: no cap).
func EnsureTenant(ctx context.Context, js jetstream.JetStream, cfg Config, tenantID string, maxRunning int) (jetstream.Consumer, error) {
	cfg = cfg.WithDefaults()
	if maxRunning < 1 {
		maxRunning = -1
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, StreamName, jetstream.ConsumerConfig{
		Durable:           TenantConsumer(tenantID),
		Description:       "gantry runners: jobs of tenant " + tenantID,
		FilterSubject:     TenantSubject(tenantID),
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           cfg.AckWait,
		MaxDeliver:        -1,
		MaxAckPending:     maxRunning,
		InactiveThreshold: tenantQueueIdle,
		Replicas:          cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("create consumer %s: %w", TenantConsumer(tenantID), err)
	}
	return cons, nil
}

// ErrFull is returned by Publisher.Publish when the stream holds its
// MaxMsgs or MaxBytes: the job cannot be queued now.
var ErrFull = errors.New("the job queue is full")

// errCodeStoreFailed is JetStream's error code for a message the stream
// refused to store (its limits with DiscardNew: "maximum messages
// exceeded", "maximum bytes exceeded").
const errCodeStoreFailed jetstream.ErrorCode = 10077

// Publisher publishes run messages, making sure first that the tenant's
// queue exists with its cap. It is safe for concurrent use.
type Publisher struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg Config

	// ensured holds the cap each tenant's consumer was last ensured with.
	ensured *expirable.LRU[string, int]
}

// ensuredFor is how long a publisher trusts that a tenant's consumer it
// ensured still exists with the cap it set.
const ensuredFor = time.Minute

// NewPublisher makes a Publisher.
func NewPublisher(nc *nats.Conn, js jetstream.JetStream, cfg Config) *Publisher {
	return &Publisher{nc: nc, js: js, cfg: cfg.WithDefaults(), ensured: expirable.NewLRU[string, int](10_000, nil, ensuredFor)}
}

// Publish puts a run message on its tenant's subject, with the trace of
// the span in ctx in its headers, waits for JetStream's ack and returns
// the message's stream sequence (a job's row records it), then tells idle
// runners (ReadySubject). msgID deduplicates
// retried publishes within the stream's window: the job id for a job's
// first message. maxRunning is the tenant's cap on running jobs.
func (p *Publisher) Publish(ctx context.Context, m RunMessage, msgID string, maxRunning int) (uint64, error) {
	if m.TenantID == "" {
		return 0, errors.New("run message without a tenant")
	}
	if err := p.ensure(ctx, m.TenantID, maxRunning); err != nil {
		return 0, err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return 0, err
	}
	msg := &nats.Msg{Subject: TenantSubject(m.TenantID), Data: data}
	injectTrace(ctx, msg)
	ack, err := p.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID))
	var jsErr jetstream.JetStreamError
	if errors.As(err, &jsErr) && jsErr.APIError() != nil && jsErr.APIError().ErrorCode == errCodeStoreFailed &&
		strings.Contains(jsErr.APIError().Description, "maximum") {
		return 0, fmt.Errorf("%w (%s)", ErrFull, jsErr.APIError().Description)
	}
	if err != nil {
		return 0, err
	}
	_ = p.nc.Publish(ReadySubject, []byte(m.TenantID))
	return ack.Sequence, nil
}

func (p *Publisher) ensure(ctx context.Context, tenantID string, maxRunning int) error {
	if n, ok := p.ensured.Get(tenantID); ok && n == maxRunning {
		return nil
	}
	if _, err := EnsureTenant(ctx, p.js, p.cfg, tenantID, maxRunning); err != nil {
		return err
	}
	p.ensured.Add(tenantID, maxRunning)
	return nil
}
