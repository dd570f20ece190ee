package openapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

type reflectBase struct {
	Name string `json:"name"`
}

type reflectSample struct {
	reflectBase
	Status jobs.Status       `json:"status"`
	When   *time.Time        `json:"when"`
	Tags   []string          `json:"tags,omitempty"`
	Info   *jobs.ErrorInfo   `json:"info"`
	Labels map[string]string `json:"labels"`
	Size   int64             `json:"size,omitzero"`
	Doc    string            `json:"doc" jsonschema:"a described field"`
	Hidden string            `json:"-"`
}

type selfMarshaler struct{ X int }

func (selfMarshaler) MarshalJSON() ([]byte, error) { return []byte(`"x"`), nil }

// TestSchemaReflection: schemas are what encoding/json writes: json names,
// embedded fields promoted, omitempty/omitzero optional, pointers nullable,
// components as $refs (nullable ones as oneOf), enums from Go, descriptions
// from jsonschema tags.
func TestSchemaReflection(t *testing.T) {
	g := NewReflector([]Component{{"JobStatus", typ[jobs.Status]()}, {"ErrorInfo", typ[jobs.ErrorInfo]()}})
	s, err := g.Schema(typ[reflectSample]())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(s)
	want := `{"additionalProperties":false,"properties":{` +
		`"doc":{"description":"a described field","type":"string"},` +
		`"info":{"oneOf":[{"$ref":"#/components/schemas/ErrorInfo"},{"type":"null"}]},` +
		`"labels":{"additionalProperties":{"type":"string"},"type":"object"},` +
		`"name":{"type":"string"},` +
		`"size":{"format":"int64","type":"integer"},` +
		`"status":{"$ref":"#/components/schemas/JobStatus"},` +
		`"tags":{"items":{"type":"string"},"type":"array"},` +
		`"when":{"format":"date-time","type":["string","null"]}},` +
		`"required":["name","status","when","info","labels","doc"],"type":"object"}`
	if string(got) != want {
		t.Errorf("schema:\n got %s\nwant %s", got, want)
	}

	status, err := g.define(typ[jobs.Status](), map[reflect.Type]bool{})
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := status["enum"].([]any); len(e) != len(jobs.Statuses) || e[0] != string(jobs.Statuses[0]) {
		t.Errorf("JobStatus enum = %v, want jobs.Statuses", status["enum"])
	}

	if _, err := g.Schema(typ[selfMarshaler]()); err == nil || !strings.Contains(err.Error(), "marshals itself") {
		t.Errorf("a type with its own MarshalJSON: %v, want an error asking for its schema", err)
	}
}

// TestSchemaNotes: notes add prose to reflected properties, and a note on
// a property the type does not have (a renamed or removed field) fails.
func TestSchemaNotes(t *testing.T) {
	g := NewReflector([]Component{{"Sample", typ[reflectSample]()}})
	out, err := g.components(map[string]Note{"Sample": {Description: "A sample.", Properties: map[string]js{
		"name": {"description": "Its name.", "pattern": "^[a-z]+$"}, "tags": {"items": js{"maxLength": 9}},
	}, Optional: []string{"doc"}}})
	if err != nil {
		t.Fatal(err)
	}
	s := out["Sample"].(js)
	props := s["properties"].(js)
	if s["description"] != "A sample." || props["name"].(js)["pattern"] != "^[a-z]+$" || props["tags"].(js)["items"].(js)["maxLength"] != 9 ||
		props["tags"].(js)["items"].(js)["type"] != "string" {
		t.Errorf("notes not applied: %v", s)
	}
	for _, r := range s["required"].([]any) {
		if r == "doc" {
			t.Errorf("doc is optional by its note, but required: %v", s["required"])
		}
	}
	for _, bad := range []map[string]Note{
		{"Sample": {Properties: map[string]js{"title": {"description": "no such field"}}}},
		{"Sample": {Optional: []string{"tags"}}},
		{"Nothing": {Description: "no such component"}},
	} {
		if _, err := NewReflector([]Component{{"Sample", typ[reflectSample]()}}).components(bad); err == nil {
			t.Errorf("notes %v: no error", bad)
		}
	}
}
