package test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/gantryhq/gantry/internal/eventually"
	"github.com/gantryhq/gantry/jobs"
)

const plotCode = `
import os
import matplotlib.pyplot as plt
os.makedirs("out", exist_ok=True)
print("plotting", flush=True)
plt.bar(["a", "b", "c"], [3, 1, 2])
plt.savefig("out/plot.png")
print("saved out/plot.png")
`

func initialize(t *testing.T, c *client.Client) {
	t.Helper()
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
}

type toolJob struct {
	JobID     string      `json:"job_id"`
	Status    jobs.Status `json:"status"`
	Stdout    string      `json:"stdout"`
	Artifacts []struct {
		Path string `json:"path"`
		URL  string `json:"url"`
	} `json:"artifacts"`
}

// runPlot runs the plotting program through execute_code with a progress
// token and checks the output, the progress and the PNG behind the link.
func runPlot(t *testing.T, c *client.Client) {
	t.Helper()
	var mu sync.Mutex
	var progress strings.Builder
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			mu.Lock()
			progress.WriteString(n.Params.AdditionalFields["message"].(string))
			mu.Unlock()
		}
	})
	tools, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil || len(tools.Tools) < 6 {
		t.Fatalf("tools/list: %v (%d tools)", err, len(tools.Tools))
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "execute_code"
	req.Params.Arguments = map[string]any{"language": "python", "code": plotCode}
	req.Params.Meta = &mcp.Meta{ProgressToken: "plot"}
	res, err := c.CallTool(context.Background(), req)
	if err != nil || res.IsError {
		t.Fatalf("execute_code: %v %+v", err, res)
	}
	var j toolJob
	data, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(data, &j)
	if j.Status != jobs.StatusSucceeded || j.Stdout != "plotting\nsaved out/plot.png\n" || len(j.Artifacts) != 1 {
		t.Fatalf("result: %s", data)
	}
	r, err := http.Get(j.Artifacts[0].URL) // the link needs no credentials
	if err != nil {
		t.Fatal(err)
	}
	png, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != 200 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("plot download: %d, %d bytes", r.StatusCode, len(png))
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(progress.String(), "plotting") {
		t.Errorf("no progress notification carried the output: %q", progress.String())
	}
}

func TestMCPOverHTTP(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2")
	c, err := client.NewStreamableHttpClient(d.url+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + d.key}))
	if err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	runPlot(t, c)

	t.Run("figures come back inline", func(t *testing.T) {
		req := mcp.CallToolRequest{}
		req.Params.Name = "execute_code"
		req.Params.Arguments = map[string]any{"language": "python", "code": `import matplotlib.pyplot as plt
plt.plot([1, 4, 9]); plt.title("shown"); plt.show()
plt.figure(); plt.bar(["a", "b"], [3, 5])  # left open at exit
print("drew two")`}
		res, err := c.CallTool(context.Background(), req)
		if err != nil || res.IsError {
			t.Fatalf("execute_code: %v %+v", err, res)
		}
		var j toolJob
		data, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(data, &j)
		if j.Status != jobs.StatusSucceeded || len(j.Artifacts) != 2 {
			t.Fatalf("result: %s", data)
		}
		var images int
		for _, content := range res.Content {
			if img, ok := content.(mcp.ImageContent); ok {
				png, err := base64.StdEncoding.DecodeString(img.Data)
				if err != nil || img.MIMEType != "image/png" || !bytes.HasPrefix(png, []byte("\x89PNG")) {
					t.Errorf("image content %s: %v", img.MIMEType, err)
				}
				images++
			}
		}
		if images != 2 {
			t.Errorf("%d images inline, want 2 (content %+v)", images, res.Content)
		}
	})

	t.Run("cancelling the call kills the container", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			req := mcp.CallToolRequest{}
			req.Params.Name = "execute_code"
			req.Params.Arguments = map[string]any{"language": "bash", "code": "echo started; sleep 123"}
			_, _ = c.CallTool(ctx, req)
		}()
		var id string
		eventually.True(t, time.Minute, "the job to run", func() bool {
			var list struct{ Jobs []jobs.Job }
			_ = json.Unmarshal(d.call(t, "GET", "/v1/jobs?status=running", "").body, &list)
			if len(list.Jobs) > 0 {
				id = list.Jobs[0].ID
			}
			return id != ""
		})
		ctr := d.containerRunning(t, "sleep 123")
		cancel()
		<-done
		j := d.await(t, id, 30*time.Second, terminal)
		if j.Status != jobs.StatusCancelled {
			t.Errorf("job after the call was cancelled: %s", j.Status)
		}
		waitGone(t, ctr)
	})
}

func TestMCPOverStdio(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2")
	env := append(os.Environ(), "GANTRY_URL="+d.url, "GANTRY_API_KEY="+d.key)
	c, err := client.NewStdioMCPClient(gantryBin(t), env, "mcp")
	if err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	runPlot(t, c)

	// A wrong key is reported as an error, not a hang.
	bad, err := client.NewStdioMCPClient(gantryBin(t), append(os.Environ(), "GANTRY_URL="+d.url, "GANTRY_API_KEY=gk_wrong_key_0000000000"), "mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := bad.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	_, err = bad.Initialize(ctx, init)
	if err == nil || !strings.Contains(err.Error(), "invalid or revoked API key") {
		t.Errorf("initialize with a wrong key: %v", err)
	}
}

// TestMCPStdioPipelined: a client that writes initialize, the initialized
// notification and its calls at once, without waiting for answers, gets an
// answer to each through `gantry mcp` (it used to get "Invalid session ID"),
// and GANTRY_MCP_TOOLSETS selects the tools it sees.
func TestMCPStdioPipelined(t *testing.T) {
	d := startDev(t, "GANTRY_RUNNER_SLOTS=2")
	cmd := exec.Command(gantryBin(t), "mcp")
	cmd.Env = append(os.Environ(), "GANTRY_URL="+d.url, "GANTRY_API_KEY="+d.key, "GANTRY_MCP_TOOLSETS=code")
	cmd.Stdin = strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_code","arguments":{"language":"python","code":"print(6*7)"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"execute_code","arguments":{"language":"ruby","code":"x"}}}`,
	}, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gantry mcp: %v\n%s", err, out)
	}
	answers := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON-RPC: %s", line)
		}
		answers[string(m.ID)] = line
	}
	for id, want := range map[string]string{
		"1": `"protocolVersion":"2025-06-18"`,
		"3": `"stdout":"42\n"`,
		// The languages are the image's (the compilers image's under make test).
		"4": `language must be one of python, bash, node, typescript`,
	} {
		if !strings.Contains(answers[id], want) || strings.Contains(answers[id], "Invalid session ID") {
			t.Errorf("answer %s: %s", id, answers[id])
		}
	}
	var list struct {
		Result struct {
			Tools []struct{ Name string }
		}
	}
	_ = json.Unmarshal([]byte(answers["2"]), &list)
	var names []string
	for _, tool := range list.Result.Tools {
		names = append(names, tool.Name)
	}
	sort.Strings(names)
	if strings.Join(names, " ") != "execute_code get_artifact_url search_tools" {
		t.Errorf("tools with GANTRY_MCP_TOOLSETS=code: %v", names)
	}
}
