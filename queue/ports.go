package queue

// A stateful session's live sandbox serves HTTP on its ports, and the
// ingress reaches them through the runner that holds the sandbox: it asks
// on PortSubject (served, beside LiveSubject, only by that runner) for a
// connection to one port, and the bytes then flow over a tunnel (package
// tunnel) between the two, whose subjects the request and its answer
// carry.

// PortSubject is where the runner holding the live sandbox live (a
// session's Session.Live) opens connections to the sandbox's ports.
func PortSubject(sessionID, live string) string {
	return "gantry.live." + sessionID + ".port." + liveToken(live)
}

// PortOpen asks for a connection to a port of the sandbox.
type PortOpen struct {
	Port int `json:"port"`
	// TenantID is the session's tenant, which the holder checks against
	// the container's.
	TenantID string `json:"tenant_id"`
	// Stream is the asker's end of the tunnel (tunnel.Conn.Subject).
	Stream string `json:"stream"`
	// KeepMS is the session's timeout: traffic keeps the container that
	// long past it, as the session is kept.
	KeepMS int64 `json:"keep_ms,omitempty"`
}

// PortReply answers a PortOpen: the holder's end of the tunnel, or why
// there is none.
type PortReply struct {
	Stream string     `json:"stream,omitempty"`
	Error  *PortError `json:"error,omitempty"`
}

// PortError is why a port could not be reached.
type PortError struct {
	Code PortErrorCode `json:"code"`
	// Limit is the bound a busy sandbox is at.
	Limit   int    `json:"limit,omitempty"`
	Message string `json:"message"`
}

func (e *PortError) Error() string { return e.Message }

// PortErrorCode says what kind of failure a PortError is.
type PortErrorCode string

// The codes.
const (
	// PortClosed: nothing listens on the port.
	PortClosed PortErrorCode = "closed"
	// PortForbidden: the port is gantry's own in the sandbox.
	PortForbidden PortErrorCode = "forbidden"
	// PortBusy: the sandbox has as many connections open as it may.
	PortBusy PortErrorCode = "busy"
	// PortGone: the runner no longer holds the sandbox, or the sandbox
	// ended.
	PortGone PortErrorCode = "gone"
	// PortFailed: anything else.
	PortFailed PortErrorCode = "failed"
)
