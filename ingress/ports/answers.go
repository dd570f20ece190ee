package ports

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"regexp"
	"strconv"
)

// A request to a sandbox's host that gantry answers itself (the sandbox
// is not found, its port not open, the token missing) is answered as
// E2B's proxy answers it, so that what E2B's users look for is there: a
// JSON object with the sandbox's id, a message in E2B's words, and the
// status as code; a browser gets the same as a small page.

// answer is one of these answers.
type answer struct {
	status int
	// fields are its JSON, message among them.
	fields map[string]any
	// retryAfter, when set, is sent as Retry-After (seconds).
	retryAfter int
}

func (a answer) message() string { s, _ := a.fields["message"].(string); return s }

func notFound(sid string) answer {
	return answer{status: http.StatusNotFound, fields: map[string]any{"sandboxId": sid, "message": "The sandbox was not found"}}
}

func portClosed(sid string, port int) answer {
	return answer{status: http.StatusBadGateway, fields: map[string]any{"sandboxId": sid,
		"message": "The sandbox is running but port is not open", "port": strconv.Itoa(port)}}
}

func portNotAllowed(sid string, port int) answer {
	return answer{status: http.StatusForbidden, fields: map[string]any{"sandboxId": sid, "port": port,
		"message": fmt.Sprintf("Access to port %d is not allowed", port), "code": http.StatusForbidden}}
}

func tokenMissing(sid string) answer {
	return answer{status: http.StatusForbidden, fields: map[string]any{"sandboxId": sid, "code": http.StatusForbidden,
		"message": "Sandbox is secured with traffic access token. Token header '" + TrafficTokenHeader + "' is missing"}}
}

func tokenInvalid(sid string) answer {
	return answer{status: http.StatusForbidden, fields: map[string]any{"sandboxId": sid, "code": http.StatusForbidden,
		"message": "Sandbox is secured with traffic access token. Provided token is invalid."}}
}

func paused(sid string) answer {
	return answer{status: http.StatusConflict, fields: map[string]any{"sandboxId": sid, "code": http.StatusConflict,
		"message": "The sandbox is paused", "canAutoResume": false}}
}

func tooManyConnections(sid string, limit int) answer {
	return answer{status: http.StatusTooManyRequests, retryAfter: 1, fields: map[string]any{"sandboxId": sid,
		"code": http.StatusTooManyRequests, "connectionLimit": limit,
		"message": fmt.Sprintf("The sandbox has too many concurrent incoming connections (limit: %d)", limit)}}
}

func tooManyRequests(sid string, perSecond float64, retryAfter int) answer {
	return answer{status: http.StatusTooManyRequests, retryAfter: retryAfter, fields: map[string]any{"sandboxId": sid,
		"code": http.StatusTooManyRequests, "requestLimit": perSecond,
		"message": fmt.Sprintf("The sandbox gets too many requests (limit: %g per second)", perSecond)}}
}

func failed(sid string, status int, msg string, retryAfter int) answer {
	return answer{status: status, retryAfter: retryAfter, fields: map[string]any{"sandboxId": sid, "code": status, "message": msg}}
}

// browser tells a browser from other clients, as E2B's proxy does.
var browser = regexp.MustCompile(`(?i)mozilla|chrome|safari|firefox|edge|opera|msie`)

var page = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Status}} {{.Title}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem;color:#222}code{background:#eee;padding:.1rem .3rem}</style>
</head><body><h1>{{.Title}}</h1><p>{{.Message}}</p>{{if .Sandbox}}<p>Sandbox <code>{{.Sandbox}}</code>{{if .Port}}, port <code>{{.Port}}</code>{{end}}</p>{{end}}</body></html>
`))

// write sends the answer: a page to a browser, JSON to the rest.
func (a answer) write(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	if a.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(a.retryAfter))
	}
	if browser.MatchString(r.UserAgent()) {
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		w.WriteHeader(a.status)
		sid, _ := a.fields["sandboxId"].(string)
		_ = page.Execute(w, struct {
			Status         int
			Title, Message string
			Sandbox        string
			Port           any
		}{a.status, http.StatusText(a.status), a.message(), sid, a.fields["port"]})
		return
	}
	h.Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(a.status)
	_ = json.NewEncoder(w).Encode(a.fields)
}
