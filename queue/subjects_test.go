package queue_test

import (
	"testing"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
)

func TestJobIDFromSubject(t *testing.T) {
	t.Parallel()
	a := jobs.NewID("job")
	if queue.JobIDFromSubject(queue.StatusSubject(a)) != a || queue.JobIDFromSubject(queue.CancelSubject(a)) != a {
		t.Error("JobIDFromSubject does not invert the subject builders")
	}
}

func TestSessionIDFromSubject(t *testing.T) {
	t.Parallel()
	s := jobs.NewID("ses")
	if got := queue.SessionIDFromSubject(queue.SessionClosedSubject(s)); got != s {
		t.Errorf("SessionIDFromSubject(SessionClosedSubject(%s)) = %q", s, got)
	}
	if got := queue.SessionIDFromSubject(queue.StatusSubject(jobs.NewID("job"))); got != "" {
		t.Errorf("a job's subject gave session %q", got)
	}
}
