package main

import (
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/jobs"
)

func TestPolicyMaxima(t *testing.T) {
	c, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	def := jobs.DefaultPolicy()
	if got := c.Policy.MaxLimits.CPUs; got != float64(runtime.NumCPU()) {
		t.Errorf("default GANTRY_MAX_CPUS = %g, want this machine's %d", got, runtime.NumCPU())
	}
	if c.Policy.MaxLimits.MemoryMB != def.MaxLimits.MemoryMB || c.Policy.MaxTimeoutMS != def.MaxTimeoutMS {
		t.Errorf("defaults changed: %+v", c.Policy)
	}

	t.Setenv("GANTRY_MAX_CPUS", "1.5")
	t.Setenv("GANTRY_MAX_MEMORY_MB", "2048")
	t.Setenv("GANTRY_MAX_DISK_MB", "1024")
	t.Setenv("GANTRY_MAX_OUTPUT_BYTES", "2097152")
	t.Setenv("GANTRY_MAX_TIMEOUT_MS", "60000")
	if c, err = loadConfig(); err != nil {
		t.Fatal(err)
	}
	p := c.Policy
	if p.MaxLimits.CPUs != 1.5 || p.MaxLimits.MemoryMB != 2048 || p.MaxLimits.DiskMB != 1024 || p.MaxLimits.OutputBytes != 2<<20 || p.MaxTimeoutMS != 60000 {
		t.Errorf("policy = %+v", p)
	}

	// Bad values are refused at start, each naming its variable.
	t.Setenv("GANTRY_MAX_CPUS", "0.5")         // below the default 1 CPU of a job
	t.Setenv("GANTRY_MAX_MEMORY_MB", "lots")   // not a number
	t.Setenv("GANTRY_MAX_DISK_MB", "100")      // below the default 512
	t.Setenv("GANTRY_MAX_OUTPUT_BYTES", "1.5") // not whole
	t.Setenv("GANTRY_MAX_TIMEOUT_MS", "999999999999")
	_, err = loadConfig()
	if err == nil {
		t.Fatal("bad maxima accepted")
	}
	for _, name := range []string{"GANTRY_MAX_CPUS", "GANTRY_MAX_MEMORY_MB", "GANTRY_MAX_DISK_MB", "GANTRY_MAX_OUTPUT_BYTES", "GANTRY_MAX_TIMEOUT_MS"} {
		if !strings.Contains(err.Error(), name+"=") {
			t.Errorf("the error does not name %s:\n%v", name, err)
		}
	}
	if !strings.Contains(err.Error(), "the default limits.cpus of a job") {
		t.Errorf("the error does not say why the floor is there:\n%v", err)
	}
}

func TestQuotaSettings(t *testing.T) {
	c, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.TenantLimits != jobs.DefaultTenantLimits() || c.Queue.MaxMsgs != 100_000 || c.Queue.MaxBytes != 256<<20 {
		t.Errorf("defaults: %+v, queue %d msgs %d bytes", c.TenantLimits, c.Queue.MaxMsgs, c.Queue.MaxBytes)
	}
	t.Setenv("GANTRY_TENANT_RPS", "2.5")
	t.Setenv("GANTRY_TENANT_MAX_QUEUED", "10")
	t.Setenv("GANTRY_TENANT_MAX_RUNNING", "3")
	t.Setenv("GANTRY_TENANT_MAX_LIVE_SESSIONS", "7")
	t.Setenv("GANTRY_QUEUE_MAX_MSGS", "500")
	if c, err = loadConfig(); err != nil {
		t.Fatal(err)
	}
	if (c.TenantLimits != jobs.TenantLimits{RequestsPerSecond: 2.5, MaxQueued: 10, MaxRunning: 3, MaxLiveSessions: 7, MaxSnapshotMB: 20480}) || c.Queue.MaxMsgs != 500 {
		t.Errorf("set: %+v, queue %d msgs", c.TenantLimits, c.Queue.MaxMsgs)
	}
	t.Setenv("GANTRY_TENANT_RPS", "fast")
	t.Setenv("GANTRY_TENANT_MAX_QUEUED", "0")
	t.Setenv("GANTRY_TENANT_MAX_RUNNING", "-2")
	t.Setenv("GANTRY_QUEUE_MAX_MSGS", "5")
	_, err = loadConfig()
	for _, name := range []string{"GANTRY_TENANT_RPS", "GANTRY_TENANT_MAX_QUEUED", "GANTRY_TENANT_MAX_RUNNING", "GANTRY_QUEUE_MAX_MSGS"} {
		if err == nil || !strings.Contains(err.Error(), name+"=") {
			t.Errorf("the error does not name %s: %v", name, err)
		}
	}
}

func TestMCPSettings(t *testing.T) {
	t.Setenv("GANTRY_MCP_COMMANDS", "npx -y @scope/server, /opt/mcp/billing")
	t.Setenv("GANTRY_MCP_ENV", "GITHUB_TOKEN, *_API_KEY")
	c, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.MCPCommands, [][]string{{"npx", "-y", "@scope/server"}, {"/opt/mcp/billing"}}) ||
		!reflect.DeepEqual(c.MCPEnv, []string{"GITHUB_TOKEN", "*_API_KEY"}) {
		t.Errorf("commands %q, env %q", c.MCPCommands, c.MCPEnv)
	}
	// Arguments with spaces or commas: the JSON form.
	t.Setenv("GANTRY_MCP_COMMANDS", `[["python3", "-c", "print(1, 2)"]]`)
	if c, err = loadConfig(); err != nil || !reflect.DeepEqual(c.MCPCommands, [][]string{{"python3", "-c", "print(1, 2)"}}) {
		t.Errorf("JSON form: %q %v", c.MCPCommands, err)
	}
	for name, v := range map[string]string{"GANTRY_MCP_COMMANDS": `[["x"], []]`, "GANTRY_MCP_ENV": "*"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, v)
			if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%s: %v", name, v, err)
			}
		})
	}
}
