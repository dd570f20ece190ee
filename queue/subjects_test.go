package queue_test

import (
	"testing"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/queue"
)

func TestJobIDFromSubject(t *testing.T) {
	a := jobs.NewID("job")
	if queue.JobIDFromSubject(queue.StatusSubject(a)) != a || queue.JobIDFromSubject(queue.CancelSubject(a)) != a {
		t.Error("JobIDFromSubject does not invert the subject builders")
	}
}
