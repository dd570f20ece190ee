package mcpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestArgumentErrorKinds: every kind of error the schema validator reports
// reads as a sentence naming the argument, whatever keyword caused it.
func TestArgumentErrorKinds(t *testing.T) {
	for _, c := range []struct{ schema, args, want string }{
		{`{"properties":{"a":{"const":"x"}}}`, `{"a":"y"}`, `a must be x, not "y"`},
		{`{"properties":{"a":{"enum":[1,2]}}}`, `{"a":3}`, `a must be one of 1, 2, not 3`},
		{`{"properties":{"a":{"type":["string","null"]}}}`, `{"a":1}`, `a must be null or text, not a number`},
		{`{"properties":{"a":{"type":"boolean"}}}`, `{"a":"yes"}`, `a must be true or false, not text`},
		{`{"properties":{"a":{"type":"string","format":"date-time"}}}`, `{"a":"noon"}`, `a must be a valid date-time`},
		{`{"properties":{"a":{"type":"string","minLength":3}}}`, `{"a":"x"}`, `a must be at least 3 characters long (it is 1)`},
		{`{"properties":{"a":{"exclusiveMinimum":0}}}`, `{"a":0}`, `a must be more than 0, not 0`},
		{`{"properties":{"a":{"exclusiveMaximum":1.5}}}`, `{"a":2}`, `a must be less than 1.5, not 2`},
		{`{"properties":{"a":{"multipleOf":5}}}`, `{"a":7}`, `a must be a multiple of 5, not 7`},
		{`{"properties":{"a":{"minItems":2}}}`, `{"a":[1]}`, `a has 1 items; at least 2`},
		{`{"properties":{"a":{"uniqueItems":true}}}`, `{"a":[1,1]}`, `a has the same item twice (items 0 and 1)`},
		{`{"properties":{"a":{"minProperties":1}}}`, `{"a":{}}`, `a has 0 entries; at least 1`},
		{`{"properties":{"a":{"maxProperties":1}}}`, `{"a":{"x":1,"y":2}}`, `a has 2 entries; at most 1`},
		{`{"properties":{"a":{"propertyNames":{"pattern":"^[a-z]+$"}}}}`, `{"a":{"X":1}}`, `a has a key that is not allowed: "X"`},
		{`{"dependentRequired":{"a":["b"]}}`, `{"a":1}`, `a needs b too`},
		{`{"properties":{"a":false}}`, `{"a":1}`, `a is not allowed here`},
		{`{"properties":{"a":{"not":{"type":"string"}}}}`, `{"a":"x"}`, `a has a form that is not allowed`},
		{`{"properties":{"a":{"oneOf":[{"type":"integer"},{"type":"number"}]}}}`, `{"a":1}`, `a matches more than one of the allowed forms`},
		{`{"properties":{"a":{"contains":{"type":"string"}}}}`, `{"a":[1]}`, `a[0] must be text, not a number`},
		{`{"properties":{"a":{"contains":{"type":"string"},"maxContains":1}}}`, `{"a":["x","y"]}`, `a must have at most 1 items of the required form, not 2`},
		{`{"properties":{"a":{"contentEncoding":"base64"}}}`, `{"a":"!!"}`, `a is not valid base64`},
		{`{"type":"object"}`, `[1]`, `the arguments must be an object, not a list`},
		{`{"properties":{"a":{"properties":{"b":{"type":"integer"}}}}}`, `{"a":{"b":"x"}}`, `a.b must be an integer, not text`},
	} {
		s, err := compileInputSchema("t", json.RawMessage(c.schema))
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		req := mcp.CallToolRequest{}
		req.Params.RawArguments = json.RawMessage(c.args)
		if got := s.check(req); !strings.Contains(got, c.want) {
			t.Errorf("%s with %s:\n got %q\nwant %q", c.schema, c.args, got, c.want)
		}
	}
}
