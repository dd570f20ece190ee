package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

// liveAcrossRunners runs cells cells in each of n stateful sessions, each
// adding 1 to a counter, through both ingresses in turn while both runners
// take the sessions' messages, and fails for every cell that did not find
// the session's live state (its counter restarted).
func liveAcrossRunners(t *testing.T, cl *client, n, cells int) {
	t.Helper()
	ctx := context.Background()
	lost := 0
	for s := range n {
		status, b, err := cl.retry(ctx, s, time.Minute, "POST", "/v1/sessions", []byte(`{"language":"python","stateful":true}`))
		var sess jobs.Session
		if err != nil || status != 201 || json.Unmarshal(b, &sess) != nil {
			t.Fatalf("create a stateful session: %d %s %v", status, b, err)
		}
		for i := 1; i <= cells; i++ {
			body, _ := json.Marshal(map[string]any{"language": "python", "session_id": sess.ID,
				"code": "n = globals().get('n', 0) + 1\nprint(n)"})
			status, b, err := cl.retry(ctx, i, 2*time.Minute, "POST", "/v1/execute?wait=60s", body)
			var j jobs.Job
			if err != nil || status != 200 || json.Unmarshal(b, &j) != nil {
				t.Fatalf("session %s cell %d: %d %s %v", sess.ID, i, status, b, err)
			}
			if j.Stdout != fmt.Sprintf("%d\n", i) {
				lost++
				t.Errorf("session %s cell %d: %q, live %s (%s)", sess.ID, i, j.Stdout, j.LiveState, j.LiveStateReason)
			}
		}
		_, _, _ = cl.retry(ctx, 0, time.Minute, "DELETE", "/v1/sessions/"+sess.ID, nil)
	}
	t.Logf("stateful sessions on two runners: %d sessions × %d cells, %d lost", n, cells, lost)
}
