package mcpapi

import (
	"encoding/json"
	"strings"
	"testing"
)

type noteArgs struct {
	Name  string `json:"name"`
	Files []struct {
		Path     string `json:"path"`
		Encoding string `json:"encoding,omitempty"`
	} `json:"files,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	Size   int64             `json:"size,omitempty"`
}

// TestToolSchemaFromType: a tool's schema is its Go type's, fields without
// omitempty required, notes laid over by path (into array items), inputs
// closed to unknown arguments, outputs not, and nothing OpenAPI-only.
func TestToolSchemaFromType(t *testing.T) {
	note := toolNote{props: map[string]js{
		"name":           {"pattern": "^[a-z]+$"},
		"files.encoding": {"enum": []any{"utf8", "base64"}},
	}}
	var in js
	if err := json.Unmarshal(toolSchema(typ[noteArgs](), note, true), &in); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(in)
	for _, want := range []string{
		`"required":["name"]`,
		`"additionalProperties":false`,
		`"name":{"pattern":"^[a-z]+$","type":"string"}`,
		`"encoding":{"enum":["utf8","base64"],"type":"string"}`,
		`"size":{"type":"integer"}`,
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("input schema %s\nlacks %s", got, want)
		}
	}
	out := string(toolSchema(typ[noteArgs](), toolNote{}, false))
	if strings.Contains(out, `"additionalProperties":false`) || strings.Contains(out, "int64") {
		t.Errorf("output schema %s: closed objects or OpenAPI formats", out)
	}
	if !strings.Contains(out, `"labels":{"additionalProperties":{"type":"string"},"type":"object"}`) {
		t.Errorf("output schema %s: a map's values", out)
	}

	for _, bad := range []toolNote{
		{props: map[string]js{"title": {"minLength": 1}}},
		{props: map[string]js{"files.content": {"minLength": 1}}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("a note on a property the type lacks (%v) was accepted", bad.props)
				}
			}()
			toolSchema(typ[noteArgs](), bad, true)
		}()
	}
}
