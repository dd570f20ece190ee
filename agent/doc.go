// Package agent is gantry's sandbox agent, the in-sandbox end of the
// protocol the runner speaks with it (package wire, the other end and the
// protocol itself).
//
// The agent is the main process of every sandbox container (the static
// binary gantry-agent, built from cmd/gantry-agent into the sandbox image).
// The runner attaches to the container's stdin and stdout and sends
// requests as frames: run a program, stream a tar of files out, restore a
// tar in, replace the skills, empty the workspace. The agent answers with
// frames too; the runner treats everything the agent sends as untrusted,
// since the program shares the container with it.
//
// With the "namespaces" isolation (the default), each program runs in a
// fresh sandbox inside the container: new user, mount, pid, ipc, uts,
// network and cgroup namespaces, no capabilities, the job's own seccomp
// filter, its own /proc, /dev and /tmp, the container's /workspace bound
// in, the skills and the program read-only. A Python program runs in a
// fork of the container's warm interpreter, which has the data libraries
// imported and builds that sandbox itself (warm.go); any other program in
// a bubblewrap sandbox. When the program's main process exits, the kernel
// kills everything it started with its pid namespace, so a container can
// serve one job after another without one seeing another. A stateful
// session's container keeps one such sandbox for the session's whole life
// instead (live.go). With the "container" isolation (gVisor, where user
// namespaces cannot be made) the program runs directly in the container,
// which then serves a single job (or a single stateful session).
package agent
