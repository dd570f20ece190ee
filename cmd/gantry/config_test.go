package main

import (
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
