package runner

import (
	"sync"
)

// output collects one output stream of a job, up to a cap, and hands every
// kept chunk to publish as it arrives so that clients can follow the job
// live. Bytes past the cap are counted and dropped.
type output struct {
	name    string
	limit   int
	publish func(stream string, offset int, chunk []byte)

	mu        sync.Mutex
	buf       []byte
	truncated bool
}

func newOutput(name string, limit int, publish func(string, int, []byte)) *output {
	return &output{name: name, limit: limit, publish: publish}
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	keep := min(len(p), o.limit-len(o.buf))
	if keep < len(p) {
		o.truncated = true
	}
	if keep > 0 {
		offset := len(o.buf)
		o.buf = append(o.buf, p[:keep]...)
		if o.publish != nil {
			o.publish(o.name, offset, o.buf[offset:len(o.buf):len(o.buf)])
		}
	}
	return len(p), nil
}

// snapshot returns a copy of what was kept so far and whether anything was
// dropped.
func (o *output) snapshot() ([]byte, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]byte(nil), o.buf...), o.truncated
}
