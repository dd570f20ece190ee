package jobs

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseCellOutputs(t *testing.T) {
	e, err := ParseException([]byte(`{"name":"ZeroDivisionError","value":"division by zero","traceback":"Traceback ..."}`))
	if err != nil || e.Name != "ZeroDivisionError" || e.Value != "division by zero" {
		t.Fatalf("%+v %v", e, err)
	}
	for _, bad := range []string{`{"name":""}`, `[]`, `{"name":1}`, `{"name":"` + strings.Repeat("x", 300) + `"}`} {
		if _, err := ParseException([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	d, err := ParseDisplays([]json.RawMessage{json.RawMessage(`{"text/plain":"<Figure>","image/png":"iVBORw0KGgo="}`), json.RawMessage(`{"image/png":"x"}`)})
	if len(d) != 1 || d[0].Text != "<Figure>" || err == nil {
		t.Errorf("displays %+v, err %v", d, err)
	}
	if _, err := ParseDisplays(make([]json.RawMessage, MaxDisplays+1)); err == nil {
		t.Error("too many displays accepted")
	}
}

// FuzzParseCellOutputs feeds what a sandbox reports of a cell (untrusted)
// to its parsers: no panic, and what they accept is within its bounds.
func FuzzParseCellOutputs(f *testing.F) {
	f.Add([]byte(`{"name":"E","value":"v","traceback":"t"}`), []byte(`{"text/plain":"x","text/html":"<b>"}`))
	f.Add([]byte(`{}`), []byte(`{"application/json":{"a":[1,2]}}`))
	f.Fuzz(func(t *testing.T, exc, display []byte) {
		if e, err := ParseException(exc); err == nil {
			for _, s := range []string{e.Name, e.Value, e.Traceback} {
				if !utf8.ValidString(s) || utf8.RuneCountInString(s) > MaxValueText+1 {
					t.Fatalf("accepted %q", s)
				}
			}
		}
		d, _ := ParseDisplays([]json.RawMessage{display, display})
		for _, v := range d {
			if _, err := json.Marshal(v); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A NUL a program put in its value or exception is stored as U+FFFD
// (Postgres holds none), not refused with the job's result.
func TestValueAndExceptionWithoutNUL(t *testing.T) {
	v, err := ParseValue([]byte(`{"text/plain": "a\u0000b", "application/json": {"k": "x\u0000"}}`))
	if err != nil || v.Text != "a\uFFFDb" || string(v.JSON) != `{"k": "x\ufffd"}` {
		t.Errorf("value: %+v %s %v", v, v.JSON, err)
	}
	e, err := ParseException([]byte(`{"name": "ValueError", "value": "\u0000", "traceback": "t\u0000"}`))
	if err != nil || e.Value != "\uFFFD" || e.Traceback != "t\uFFFD" {
		t.Errorf("exception: %+v %v", e, err)
	}
}
