package jobs

import (
	"strings"
	"testing"
)

func TestNormalizeTests(t *testing.T) {
	p := DefaultPolicy()
	s := func(v string) *string { return &v }
	ok := Request{Language: "python", Code: "print(input())", Tests: []Test{{Stdin: "a", ExpectedStdout: s("a\n")}, {Stdin: "b"}}}
	spec, err := p.Normalize(ok)
	if err != nil || len(spec.Tests) != 2 || spec.Compare != CompareLines || spec.StopOnFailure {
		t.Fatalf("%+v %v", spec, err)
	}
	sid := "ses_x"
	for field, req := range map[string]Request{
		"compare":                  {Language: "python", Code: "x", Compare: "exact"},
		"stop_on_failure":          {Language: "python", Code: "x", StopOnFailure: true},
		"tests":                    {Language: "python", Code: "x", Tests: make([]Test, MaxTests+1)},
		"stdin":                    {Language: "python", Code: "x", Stdin: "a", Tests: []Test{{}}},
		"tests[1].stdin":           {Language: "python", Code: "x", Tests: []Test{{}, {Stdin: "a\x00"}}},
		"tests[0].expected_stdout": {Language: "python", Code: "x", Tests: []Test{{ExpectedStdout: s("\x00")}}},
		"tolerance":                {Language: "python", Code: "x", Tests: []Test{{}}, Tolerance: 0.1},
		"compare ":                 {Language: "python", Code: "x", Tests: []Test{{}}, Compare: "fuzzy"},
		"tests ":                   {Language: "python", Code: "x", Tests: []Test{{}}, SessionID: &sid},
	} {
		_, err := p.Normalize(req)
		fe, isField := err.(*FieldError)
		if !isField || fe.Field != strings.TrimSpace(field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}

func TestMatches(t *testing.T) {
	for _, c := range []struct {
		compare   Compare
		tol       float64
		got, want string
		ok        bool
	}{
		{CompareLines, 0, "1 2  \n3\n\n\n", "1 2\n3", true},
		{CompareLines, 0, "1  2\n", "1 2\n", false},
		{CompareLines, 0, "a\r\nb\r\n", "a\nb\n", true},
		{CompareLines, 0, "", "x", false},
		{CompareExact, 0, "a\n", "a", false},
		{CompareExact, 0, "a\n", "a\n", true},
		{CompareTokens, 0, "1   2\n\n3", "1 2 3\n", true},
		{CompareTokens, 0, "1.0", "1", false},
		{CompareTokens, 1e-6, "0.3333333", "0.33333333", true},
		{CompareTokens, 1e-6, "0.334", "0.333", false},
		{CompareTokens, 1e-6, "1000000.5", "1000000", true}, // relative
		{CompareTokens, 1e-6, "x", "y", false},
		{CompareTokens, 1e-6, "1 2", "1 2 3", false},
	} {
		spec := Spec{Compare: c.compare, Tolerance: c.tol}
		ok, why := spec.Matches(c.got, c.want)
		if ok != c.ok || (!ok && why == "") {
			t.Errorf("%s %v %q vs %q: %v %q", c.compare, c.tol, c.got, c.want, ok, why)
		}
	}
}
