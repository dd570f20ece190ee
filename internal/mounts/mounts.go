// Package mounts finds and undoes mounts below a directory: what a gantry
// runner under gVisor (which mounts its images' roots) left mounted when it
// was killed outright, for the tests that kill one.
package mounts

import (
	"os"
	"strings"
	"syscall"
)

// UnmountBelow lazily unmounts everything mounted below dir (not dir
// itself) and returns what it unmounted, deepest last as /proc/mounts lists
// them.
func UnmountBelow(dir string) []string {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return nil
	}
	var done []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], strings.TrimSuffix(dir, "/")+"/") {
			if syscall.Unmount(f[1], syscall.MNT_DETACH) == nil {
				done = append(done, f[1])
			}
		}
	}
	return done
}
