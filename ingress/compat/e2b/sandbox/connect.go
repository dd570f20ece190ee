package sandbox

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// envd's services speak Connect (connectrpc.com) with its JSON codec, as
// E2B's SDKs call them: a unary method is a POST of application/json
// answered with application/json (an error: its HTTP status and
// {"code", "message"}); a server-streaming method is a POST of one
// enveloped message (application/connect+json: a flags byte, a 4-byte
// big-endian length, the JSON) answered 200 with enveloped messages and an
// end-of-stream envelope (flags 0x02) holding {"error": …} or {}. Spoken
// here by hand: only this codec is needed, and envd's Go packages are not
// published.

// rpcError is a Connect error: a code of the protocol and a message.
type rpcError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// gone: the sandbox is gone, answered as E2B's proxy does (HTTP 502).
	gone bool
}

func (e *rpcError) Error() string { return e.Code + ": " + e.Message }

// Connect's codes.
const (
	codeCanceled           = "canceled"
	codeInvalidArgument    = "invalid_argument"
	codeDeadlineExceeded   = "deadline_exceeded"
	codeNotFound           = "not_found"
	codeAlreadyExists      = "already_exists"
	codePermissionDenied   = "permission_denied"
	codeResourceExhausted  = "resource_exhausted"
	codeFailedPrecondition = "failed_precondition"
	codeUnimplemented      = "unimplemented"
	codeInternal           = "internal"
	codeUnavailable        = "unavailable"
	codeUnauthenticated    = "unauthenticated"
)

func errorf(code, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// httpStatus is the status a unary error answers with (Connect's table).
func (e *rpcError) httpStatus() int {
	switch e.Code {
	case codeCanceled:
		return 499
	case codeInvalidArgument, codeFailedPrecondition:
		return http.StatusBadRequest
	case codeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case codeNotFound:
		return http.StatusNotFound
	case codeAlreadyExists:
		return http.StatusConflict
	case codePermissionDenied:
		return http.StatusForbidden
	case codeResourceExhausted:
		return http.StatusTooManyRequests
	case codeUnimplemented:
		return http.StatusNotImplemented
	case codeUnavailable:
		return http.StatusServiceUnavailable
	case codeUnauthenticated:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}

// Content types of the JSON codec.
const (
	contentUnary  = "application/json"
	contentStream = "application/connect+json"
)

// maxMessage bounds a request message (the largest are SendInput's
// chunks of stdin).
const maxMessage = 8 << 20

// endStreamFlag marks the envelope that ends a stream.
const endStreamFlag = 0x02

// decodeUnary reads a unary request's message into v.
func decodeUnary(r *http.Request, v any) *rpcError {
	if ct := mediaType(r.Header.Get("Content-Type")); ct != contentUnary {
		return errorf(codeInvalidArgument, "content type %q: only Connect's JSON codec (%s) is served", ct, contentUnary)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxMessage+1))
	if err != nil {
		return errorf(codeInvalidArgument, "read the request: %v", err)
	}
	if len(body) > maxMessage {
		return errorf(codeResourceExhausted, "a message of more than %d bytes", maxMessage)
	}
	return decodeMessage(body, v)
}

// decodeStreamRequest reads a server-streaming request's one enveloped
// message into v.
func decodeStreamRequest(r *http.Request, v any) *rpcError {
	if ct := mediaType(r.Header.Get("Content-Type")); ct != contentStream {
		return errorf(codeInvalidArgument, "content type %q: only Connect's JSON codec (%s) is served", ct, contentStream)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxMessage+6))
	if err != nil {
		return errorf(codeInvalidArgument, "read the request: %v", err)
	}
	msg, rest, rerr := readEnvelope(body)
	if rerr != nil {
		return rerr
	}
	if len(rest) != 0 {
		return errorf(codeInvalidArgument, "a server-streaming request holds one message")
	}
	return decodeMessage(msg, v)
}

// readEnvelope splits one enveloped message off b.
func readEnvelope(b []byte) (msg, rest []byte, err *rpcError) {
	if len(b) < 5 {
		return nil, nil, errorf(codeInvalidArgument, "an enveloped message is cut short")
	}
	if b[0]&^endStreamFlag != 0 {
		return nil, nil, errorf(codeInvalidArgument, "compressed messages are not accepted")
	}
	n := binary.BigEndian.Uint32(b[1:5])
	if n > maxMessage {
		return nil, nil, errorf(codeResourceExhausted, "a message of more than %d bytes", maxMessage)
	}
	if uint32(len(b)-5) < n {
		return nil, nil, errorf(codeInvalidArgument, "an enveloped message is cut short")
	}
	return b[5 : 5+n], b[5+n:], nil
}

// decodeMessage reads a message in protobuf's JSON form (fields by their
// JSON names; unknown fields are ignored, as newer SDKs may send some).
func decodeMessage(b []byte, v any) *rpcError {
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return errorf(codeInvalidArgument, "field %s: %s is not of its type", te.Field, te.Value)
		}
		return errorf(codeInvalidArgument, "the message is not JSON: %v", err)
	}
	if dec.More() {
		return errorf(codeInvalidArgument, "the message is followed by more data")
	}
	return nil
}

func mediaType(ct string) string {
	ct, _, _ = strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(ct))
}

// writeUnary answers a unary call with its message, or its error.
func writeUnary(w http.ResponseWriter, v any, e *rpcError) {
	if e != nil {
		w.Header().Set("Content-Type", contentUnary)
		w.WriteHeader(e.httpStatus())
		_ = json.NewEncoder(w).Encode(e)
		return
	}
	w.Header().Set("Content-Type", contentUnary)
	_ = json.NewEncoder(w).Encode(v)
}

// stream answers a server-streaming call: 200 at once, then messages, then
// the end of the stream.
type stream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newStream(w http.ResponseWriter) *stream {
	w.Header().Set("Content-Type", contentStream)
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.Flush()
	return s
}

// send writes one message; an error means the client is gone.
func (s *stream) send(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.envelope(0, data)
}

// end ends the stream, with e (nil: success).
func (s *stream) end(e *rpcError) {
	data := []byte("{}")
	if e != nil {
		data, _ = json.Marshal(struct {
			Error *rpcError `json:"error"`
		}{e})
	}
	_ = s.envelope(endStreamFlag, data)
}

func (s *stream) envelope(flags byte, data []byte) error {
	buf := make([]byte, 5+len(data))
	buf[0] = flags
	binary.BigEndian.PutUint32(buf[1:5], uint32(len(data)))
	copy(buf[5:], data)
	if _, err := s.w.Write(buf); err != nil {
		return err
	}
	return s.rc.Flush()
}
