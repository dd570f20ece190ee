package ingress_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/store"
)

// TestEnvironments: a tenant lists the environments it may use (the
// default first), a job or session names one, and an unknown one, or one
// registered for other tenants only, is a 400 naming the field; a
// session's jobs run in the session's environment.
func TestEnvironments(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.st.PutEnvironment(ctx, store.Environment{Name: "datasci", Image: "gantry-sandbox-datasci:1", Description: "pandas and more"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.PutEnvironment(ctx, store.Environment{Name: "b-only", Image: "x:1", Tenants: []string{h.tenantB}}); err != nil {
		t.Fatal(err)
	}
	var list struct{ Environments []jobs.Environment }
	h.do(t, h.keyA, "GET", "/v1/environments", "").json(t, &list)
	if len(list.Environments) != 2 || list.Environments[0] != (jobs.Environment{Name: "default", Description: "gantry's sandbox image", Default: true}) ||
		list.Environments[1].Name != "datasci" || list.Environments[1].Description != "pandas and more" {
		t.Fatalf("tenant A's environments: %+v", list)
	}
	h.do(t, h.keyB, "GET", "/v1/environments", "").json(t, &list)
	if len(list.Environments) != 3 {
		t.Fatalf("tenant B's environments: %+v", list)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/environments", ""); strings.Contains(string(r.body), "gantry-sandbox-datasci") {
		t.Errorf("the image reached a tenant: %s", r.body)
	}

	for _, c := range []struct{ body, field string }{
		{`{"language":"python","code":"x","environment":"nope"}`, "environment"},
		{`{"language":"python","code":"x","environment":"b-only"}`, "environment"},
		{`{"language":"python","code":"x","environment":"Bad Name"}`, "environment"},
	} {
		if r := h.do(t, h.keyA, "POST", "/v1/jobs", c.body); r.status != 400 || !strings.Contains(string(r.body), `"field":"`+c.field+`"`) {
			t.Errorf("%s: %d %s", c.body, r.status, r.body)
		}
	}
	r := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"x","environment":"datasci"}`)
	if r.status != 202 {
		t.Fatalf("a job in datasci: %d %s", r.status, r.body)
	}
	r = h.do(t, h.keyA, "GET", "/v1/jobs/"+r.job(t).ID+"?include=spec", "")
	if !strings.Contains(string(r.body), `"environment":"datasci"`) {
		t.Errorf("the job's spec: %s", r.body)
	}
	for _, env := range []string{"", `,"environment":"default"`} {
		r = h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"x"`+env+`}`)
		if r.status != 202 {
			t.Fatalf("a job in the default: %d %s", r.status, r.body)
		}
		if r := h.do(t, h.keyA, "GET", "/v1/jobs/"+r.job(t).ID+"?include=spec", ""); !strings.Contains(string(r.body), `"environment":"default"`) {
			t.Errorf("the default job's spec: %s", r.body)
		}
	}

	// Sessions.
	if r := h.do(t, h.keyA, "POST", "/v1/sessions", `{"environment":"b-only"}`); r.status != 400 || !strings.Contains(string(r.body), `"field":"environment"`) {
		t.Errorf("a session in another tenant's environment: %d %s", r.status, r.body)
	}
	r = h.do(t, h.keyA, "POST", "/v1/sessions", `{"environment":"datasci"}`)
	var s jobs.Session
	r.json(t, &s)
	if r.status != 201 || s.Environment != "datasci" {
		t.Fatalf("a session in datasci: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"x","session_id":"`+s.ID+`","environment":"default"}`); r.status != 400 || !strings.Contains(string(r.body), `"field":"environment"`) {
		t.Errorf("a session job naming another environment: %d %s", r.status, r.body)
	}
	r = h.do(t, h.keyA, "POST", "/v1/jobs", `{"language":"python","code":"x","session_id":"`+s.ID+`"}`)
	if r.status != 202 {
		t.Fatalf("a session job: %d %s", r.status, r.body)
	}
	if r := h.do(t, h.keyA, "GET", "/v1/jobs/"+r.job(t).ID+"?include=spec", ""); !strings.Contains(string(r.body), `"environment":"datasci"`) {
		t.Errorf("a session job's environment: %s", r.body)
	}
	r = h.do(t, h.keyA, "POST", "/v1/sessions", `{}`)
	r.json(t, &s)
	if s.Environment != "default" {
		t.Errorf("a plain session's environment: %s", r.body)
	}
}
