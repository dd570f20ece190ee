package service

import (
	"net/url"
	"testing"
	"time"
)

// TestTimeParamForgivesAnUnencodedPlus: a + offset sent as it is arrives as
// a space, and is read as the + it was. (A unit test: the HTTP tests are
// held to the document, which asks for %2B.)
func TestTimeParamForgivesAnUnencodedPlus(t *testing.T) {
	q, err := url.ParseQuery("created_after=2026-01-02T16:00:00+01:00")
	if err != nil {
		t.Fatal(err)
	}
	got, err := timeParam("created_after", q.Get("created_after"))
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("created_after = %v, want %v", got, want)
	}
}
