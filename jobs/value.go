package jobs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Value is the value of the last expression of a Python job in a stateful
// session, as a notebook shows it: a MIME bundle, the `data` of a Jupyter
// execute_result. text/plain (the value's repr) is always there; the
// others are there when the object has them (its _repr_html_, _repr_png_,
// … methods or _repr_mimebundle_; a matplotlib figure is drawn as
// image/png). Images are base64. A job whose code ends in a statement, or
// in an expression that is None or ends with ";", has no value.
type Value struct {
	Text     string `json:"text/plain"`
	HTML     string `json:"text/html,omitempty"`
	Markdown string `json:"text/markdown,omitempty"`
	LaTeX    string `json:"text/latex,omitempty"`
	PNG      string `json:"image/png,omitempty"`
	JPEG     string `json:"image/jpeg,omitempty"`
	SVG      string `json:"image/svg+xml,omitempty"`
	// JSON is what the object's _repr_json_ gives, as JSON.
	JSON json.RawMessage `json:"application/json,omitempty"`
}

// MaxValueBytes bounds a value's JSON: the representations that do not fit
// are left out, largest first (text/plain is cut to MaxValueText instead).
const (
	MaxValueBytes = 1 << 20
	MaxValueText  = 64 << 10
)

// ParseValue reads a value a sandbox reported, which is untrusted: it must
// be a JSON object of known MIME types to strings (application/json: any
// JSON), valid UTF-8, images valid base64, text/plain present and within
// MaxValueText (plus the "…" the sandbox adds), and all of it within
// MaxValueBytes. Unknown MIME types are dropped.
func ParseValue(raw []byte) (*Value, error) {
	if len(raw) > MaxValueBytes+1024 {
		return nil, fmt.Errorf("value of %d bytes is over the %d-byte limit", len(raw), MaxValueBytes)
	}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return nil, errors.New("value is not a JSON object")
	}
	v := &Value{}
	strs := map[string]*string{"text/plain": &v.Text, "text/html": &v.HTML, "text/markdown": &v.Markdown,
		"text/latex": &v.LaTeX, "image/png": &v.PNG, "image/jpeg": &v.JPEG, "image/svg+xml": &v.SVG}
	for mime, data := range fields {
		if mime == "application/json" {
			if !json.Valid(data) {
				return nil, errors.New("value's application/json is not JSON")
			}
			// Postgres's jsonb holds no NUL: it is U+FFFD, as in text.
			v.JSON = bytes.ReplaceAll(append(json.RawMessage(nil), data...), []byte(`\u0000`), []byte(`\ufffd`))
			continue
		}
		dst, ok := strs[mime]
		if !ok {
			continue
		}
		if err := json.Unmarshal(data, dst); err != nil {
			return nil, fmt.Errorf("value's %s is not a string", mime)
		}
		if !utf8.ValidString(*dst) {
			return nil, fmt.Errorf("value's %s is not UTF-8", mime)
		}
		*dst = noNUL(*dst)
	}
	if v.Text == "" && fields["text/plain"] == nil {
		return nil, errors.New("value without text/plain")
	}
	if utf8.RuneCountInString(v.Text) > MaxValueText+1 {
		return nil, errors.New("value's text/plain is over its limit")
	}
	for mime, img := range map[string]string{"image/png": v.PNG, "image/jpeg": v.JPEG} {
		if img != "" {
			if _, err := base64.StdEncoding.DecodeString(img); err != nil {
				return nil, fmt.Errorf("value's %s is not base64", mime)
			}
		}
	}
	return v, nil
}

// Exception is the exception that ended a Python job of a stateful
// session (a cell), as a notebook's error output has it: the exception's
// type name, its message, and the traceback as Python prints it (the job's
// stderr has it too).
type Exception struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// Bounds of what a cell reports beside its value: at most MaxDisplays
// displays, MaxDisplayBytes of JSON in all.
const (
	MaxDisplays     = 32
	MaxDisplayBytes = 4 << 20
)

// ParseException reads an exception a sandbox reported (untrusted): a JSON
// object of three strings, valid UTF-8, each within MaxValueText (plus the
// "…" the sandbox adds), the name within 256.
func ParseException(raw []byte) (*Exception, error) {
	if len(raw) > 3*(MaxValueText*4+1024) {
		return nil, errors.New("exception is too large")
	}
	var e Exception
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, errors.New("exception is not a JSON object of strings")
	}
	for _, s := range []string{e.Name, e.Value, e.Traceback} {
		if !utf8.ValidString(s) {
			return nil, errors.New("exception is not UTF-8")
		}
		if utf8.RuneCountInString(s) > MaxValueText+1 {
			return nil, errors.New("exception's text is over its limit")
		}
	}
	if e.Name == "" || utf8.RuneCountInString(e.Name) > 257 {
		return nil, errors.New("exception without a name, or with one over 256 characters")
	}
	e.Name, e.Value, e.Traceback = noNUL(e.Name), noNUL(e.Value), noNUL(e.Traceback)
	return &e, nil
}

// noNUL replaces NUL, which Postgres cannot store in text or jsonb, with
// U+FFFD (as invalid UTF-8 in output is).
func noNUL(s string) string { return strings.ReplaceAll(s, "\x00", "\uFFFD") }

// ParseDisplays reads the displays a sandbox reported (untrusted): each as
// ParseValue reads a value, at most MaxDisplays, MaxDisplayBytes in all.
// Those that are not values are dropped (and said so in err, with the
// rest returned).
func ParseDisplays(raw []json.RawMessage) ([]Value, error) {
	if len(raw) > MaxDisplays {
		return nil, fmt.Errorf("%d displays; at most %d", len(raw), MaxDisplays)
	}
	total := 0
	for _, r := range raw {
		total += len(r)
	}
	if total > MaxDisplayBytes+MaxDisplays*1024 {
		return nil, fmt.Errorf("displays of %d bytes are over the %d-byte limit", total, MaxDisplayBytes)
	}
	out := make([]Value, 0, len(raw))
	var bad error
	for _, r := range raw {
		v, err := ParseValue(r)
		if err != nil {
			bad = err
			continue
		}
		out = append(out, *v)
	}
	return out, bad
}

// LiveState is what a job of a stateful session found of the session's
// live state: the interpreter's globals and imports, /tmp, and the
// processes earlier jobs left running.
type LiveState string

const (
	// LiveNew: the session's first job; it made the session's sandbox.
	LiveNew LiveState = "new"
	// LiveKept: the job ran in the sandbox the session's previous job left.
	LiveKept LiveState = "kept"
	// LiveLost: the sandbox earlier jobs ran in was lost (its container or
	// runner is gone, a job timed out or ran out of memory, the
	// interpreter exited); this job ran in a new one, with the workspace's
	// files as the last job left them. LiveStateReason says why.
	LiveLost LiveState = "lost"
	// LiveRestored: the job ran in the session's live state restored from
	// a checkpoint (a pause's, a fork's or snapshot's, or the last one its
	// runner took before it was lost). LiveStateReason says which, and
	// what was lost with it, if anything.
	LiveRestored LiveState = "restored"
)

// LiveStates lists every live state.
var LiveStates = []LiveState{LiveNew, LiveKept, LiveLost, LiveRestored}
