package runner

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/gantryhq/gantry/agent/wire"
)

// answerEgress is a run's egress that answers every proxy request itself,
// naming what it was asked for.
type answerEgress struct{}

func (answerEgress) ServeConn(_ context.Context, c net.Conn) {
	defer c.Close()
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	body := "proxied " + req.URL.String()
	_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\nConnection: close\r\n\r\n"+body)
}

// TestWarmJobsWithEgress: a Python job with egress is forked from the warm
// interpreter (not a fresh bubblewrap sandbox), and its sandbox's relay,
// made in the forked init, carries its proxy connections to the runner's
// egress; anything else still has no network.
func TestWarmJobsWithEgress(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker")
	}
	c := namespacesContainer(t, "the warm interpreter runs under the namespaces isolation only")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := `import socket, urllib.request
print(urllib.request.urlopen("http://allowed.example/x", timeout=5).read().decode())
try:
    socket.create_connection(("10.1.2.3", 80), timeout=2)
    print("reached")
except OSError:
    print("no network")
`
	env := map[string]string{"HTTP_PROXY": "http://" + wire.EgressProxy, "http_proxy": "http://" + wire.EgressProxy}
	for i := range 2 { // the second after a spare was made: egress takes none
		var out, errb bytes.Buffer
		req := wire.Request{Argv: []string{"python3", wire.ProgramDir + "/main.py"}, Env: env,
			Files: []wire.File{{Path: wire.ProgramDir + "/main.py", Data: []byte(code)}}, Fresh: true, Egress: true, TimeoutMS: 20000, OutputCap: 1 << 20}
		res, err := c.conn.Run(ctx, req, wire.RunIO{Stdout: &out, Stderr: &errb, Egress: answerEgress{}})
		if err != nil || res.Exit.Code != 0 || out.String() != "proxied http://allowed.example/x\nno network\n" {
			t.Fatalf("run %d: %v %+v %q %q", i, err, res.Exit, out.String(), errb.String())
		}
		if res.Exit.Launcher != wire.LauncherWarm {
			t.Errorf("run %d: launcher %q, want %q", i, res.Exit.Launcher, wire.LauncherWarm)
		}
	}
}
