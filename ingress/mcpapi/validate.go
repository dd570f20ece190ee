package mcpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// inputSchema is a tool's compiled input schema, with the schema document
// kept to name the allowed arguments when an unknown one is given.
type inputSchema struct {
	doc      any
	compiled *jsonschema.Schema
}

func compileInputSchema(tool string, raw json.RawMessage) (*inputSchema, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("input schema of %s: %w", tool, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.AssertContent()
	url := "mem:///gantry/tools/" + tool + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("input schema of %s: %w", tool, err)
	}
	compiled, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("input schema of %s: %w", tool, err)
	}
	return &inputSchema{doc: doc, compiled: compiled}, nil
}

// check validates a call's arguments and says what is wrong, in words a
// model can act on ("language must be one of python, bash, node, not
// \"ruby\""), one sentence per problem; "" when they are valid.
func (s *inputSchema) check(req mcp.CallToolRequest) string {
	raw := req.Params.RawArguments
	if len(bytes.TrimSpace(raw)) == 0 {
		var err error
		if raw, err = json.Marshal(req.GetArguments()); err != nil {
			return "arguments must be a JSON object"
		}
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = []byte("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return "arguments are not valid JSON: " + err.Error()
	}
	err = s.compiled.Validate(v)
	if err == nil {
		return ""
	}
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return "invalid arguments: " + err.Error()
	}
	var msgs []string
	seen := map[string]bool{}
	for _, leaf := range leaves(verr) {
		m := s.describe(leaf)
		if !seen[m] {
			seen[m] = true
			msgs = append(msgs, m)
		}
	}
	return strings.Join(msgs, "; ")
}

// leaves are the errors that say something: the ones without causes, and
// propertyNames (whose causes speak of the key as if it were the value).
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if _, names := e.ErrorKind.(*kind.PropertyNames); len(e.Causes) == 0 || names {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// fieldPath renders an instance location as the arguments are written:
// files[0].path.
func fieldPath(loc []string) string {
	var b strings.Builder
	for _, seg := range loc {
		if _, err := strconv.Atoi(seg); err == nil && b.Len() > 0 {
			b.WriteString("[" + seg + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteString(".")
		}
		b.WriteString(seg)
	}
	return b.String()
}

var printer = message.NewPrinter(language.English)

func (s *inputSchema) describe(e *jsonschema.ValidationError) string {
	field := fieldPath(e.InstanceLocation)
	subject := field
	if subject == "" {
		subject = "the arguments"
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		names := make([]string, len(k.Missing))
		for i, m := range k.Missing {
			names[i] = fieldPath(append(append([]string{}, e.InstanceLocation...), m))
		}
		if len(names) == 1 {
			return names[0] + " is required"
		}
		return joinAnd(names) + " are required"
	case *kind.AdditionalProperties:
		allowed := s.properties(e.InstanceLocation)
		where := ""
		if field != "" {
			where = " in " + field
		}
		msg := fmt.Sprintf("unknown argument %s%s", quoteAll(k.Properties), where)
		if len(allowed) > 0 {
			msg += " (allowed: " + strings.Join(allowed, ", ") + ")"
		}
		return msg
	case *kind.Type:
		return fmt.Sprintf("%s must be %s, not %s", subject, orList(withArticles(k.Want)), withArticle(k.Got))
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = plain(w)
		}
		if len(want) == 1 {
			return fmt.Sprintf("%s must be %s, not %s", subject, want[0], quoteValue(k.Got))
		}
		return fmt.Sprintf("%s must be one of %s, not %s", subject, strings.Join(want, ", "), quoteValue(k.Got))
	case *kind.Const:
		return fmt.Sprintf("%s must be %s, not %s", subject, plain(k.Want), quoteValue(k.Got))
	case *kind.MinLength:
		if k.Want == 1 {
			return subject + " must not be empty"
		}
		return fmt.Sprintf("%s must be at least %d characters long (it is %d)", subject, k.Want, k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("%s is %d characters long; at most %d", subject, k.Got, k.Want)
	case *kind.Pattern:
		form := k.Want
		if d, _ := s.schemaAt(e.InstanceLocation)["description"].(string); d != "" {
			form = strings.TrimSuffix(d, ".")
		}
		return fmt.Sprintf("%s %s does not have the required form: %s", subject, strconv.Quote(truncateText(k.Got, 80)), form)
	case *kind.Format:
		return fmt.Sprintf("%s must be a valid %s", subject, k.Want)
	case *kind.Minimum:
		return fmt.Sprintf("%s must be at least %s, not %s", subject, ratString(k.Want), ratString(k.Got))
	case *kind.Maximum:
		return fmt.Sprintf("%s must be at most %s, not %s", subject, ratString(k.Want), ratString(k.Got))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("%s must be more than %s, not %s", subject, ratString(k.Want), ratString(k.Got))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("%s must be less than %s, not %s", subject, ratString(k.Want), ratString(k.Got))
	case *kind.MultipleOf:
		return fmt.Sprintf("%s must be a multiple of %s, not %s", subject, ratString(k.Want), ratString(k.Got))
	case *kind.MinItems:
		return fmt.Sprintf("%s has %d items; at least %d", subject, k.Got, k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("%s has %d items; at most %d", subject, k.Got, k.Want)
	case *kind.UniqueItems:
		return fmt.Sprintf("%s has the same item twice (items %d and %d)", subject, k.Duplicates[0], k.Duplicates[1])
	case *kind.MinProperties:
		return fmt.Sprintf("%s has %d entries; at least %d", subject, k.Got, k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("%s has %d entries; at most %d", subject, k.Got, k.Want)
	case *kind.PropertyNames:
		return fmt.Sprintf("%s has a key that is not allowed: %s", subject, strconv.Quote(k.Property))
	case *kind.DependentRequired:
		return fmt.Sprintf("%s needs %s too", fieldPath(append(append([]string{}, e.InstanceLocation...), k.Prop)), joinAnd(k.Missing))
	case *kind.Dependency:
		return fmt.Sprintf("%s needs %s too", fieldPath(append(append([]string{}, e.InstanceLocation...), k.Prop)), joinAnd(k.Missing))
	case *kind.FalseSchema:
		return subject + " is not allowed here"
	case *kind.Not:
		return subject + " has a form that is not allowed"
	case *kind.OneOf:
		if len(k.Subschemas) > 1 {
			return subject + " matches more than one of the allowed forms; it must match exactly one"
		}
		return subject + " does not match any of the allowed forms"
	case *kind.AnyOf, *kind.AllOf:
		return subject + " does not match the allowed forms"
	case *kind.Contains:
		return subject + " has no item of the required form"
	case *kind.MinContains:
		return fmt.Sprintf("%s must have at least %d items of the required form, not %d", subject, k.Want, len(k.Got))
	case *kind.MaxContains:
		return fmt.Sprintf("%s must have at most %d items of the required form, not %d", subject, k.Want, len(k.Got))
	case *kind.ContentEncoding:
		return fmt.Sprintf("%s is not valid %s", subject, k.Want)
	case *kind.ContentMediaType:
		return fmt.Sprintf("%s is not valid %s", subject, k.Want)
	case *kind.InvalidJsonValue:
		return subject + " is not a JSON value"
	}
	// Kinds a schema of gantry's never produces; said as the library says them.
	return subject + ": " + e.ErrorKind.LocalizedString(printer)
}

// schemaAt is the part of the schema that describes an instance location,
// following properties and items from the root (nil if there is none).
func (s *inputSchema) schemaAt(loc []string) map[string]any {
	node, _ := s.doc.(map[string]any)
	for _, seg := range loc {
		if node == nil {
			return nil
		}
		if _, err := strconv.Atoi(seg); err == nil {
			node, _ = node["items"].(map[string]any)
			continue
		}
		props, _ := node["properties"].(map[string]any)
		node, _ = props[seg].(map[string]any)
	}
	return node
}

// properties lists the names a schema allows at an instance location.
func (s *inputSchema) properties(loc []string) []string {
	props, _ := s.schemaAt(loc)["properties"].(map[string]any)
	out := make([]string, 0, len(props))
	for name := range props {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func joinAnd(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func orList(items []string) string {
	if len(items) <= 1 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

func withArticles(types []string) []string {
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = withArticle(t)
	}
	return out
}

// withArticle names a JSON type as a sentence would: "an integer".
func withArticle(t string) string {
	switch t {
	case "null":
		return "null"
	case "integer", "object", "array":
		if t == "array" {
			return "a list"
		}
		return "an " + t
	case "boolean":
		return "true or false"
	case "number":
		return "a number"
	case "string":
		return "text"
	}
	return t
}

func quoteAll(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = strconv.Quote(s)
	}
	return joinAnd(q)
}

// plain writes an allowed value as a person would: strings bare.
func plain(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// quoteValue writes a given value as JSON, shortened.
func quoteValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return truncateText(string(b), 80)
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
