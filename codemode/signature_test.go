package codemode

import (
	"encoding/json"
	"testing"
)

func TestSignature(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, out, want string
	}{
		{`{"type":"object","required":["email"],"properties":{"email":{"type":"string","description":"The customer's e-mail"}}}`,
			`{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}}}`,
			"crm.t(email: string) -> {id?: integer, name?: string}\n  Does t.\n  email: The customer's e-mail"},
		{`{"type":"object","required":["id"],"properties":{"limit":{"type":"integer","default":50},"id":{"type":"string"},` +
			`"sort":{"type":"string","enum":["asc","desc"]},"tags":{"type":"array","items":{"type":["string","null"]}},` +
			`"filter":{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"type":"number"}]},"b":{"type":"object","additionalProperties":{"type":"boolean"}}}}}}`,
			``,
			"crm.t(id: string, filter?: {a?: string|number, b?: {[key: string]: boolean}}, limit?: integer, sort?: \"asc\"|\"desc\", tags?: (string|null)[])\n  Does t.\n  limit: (default 50)"},
		{`{"type":"object"}`, `{"$ref":"#/x"}`, "crm.t() -> any\n  Does t."},
		{`not json`, ``, "crm.t()\n  Does t."},
	} {
		ti := ToolInfo{Server: "crm", Name: "t", Description: "Does\nt.", InputSchema: json.RawMessage(c.in)}
		if c.out != "" {
			ti.OutputSchema = json.RawMessage(c.out)
		}
		if got := Signature(ti); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}
