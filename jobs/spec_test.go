package jobs_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/secret"
)

func testBox(t *testing.T, fill byte) *secret.Box {
	t.Helper()
	b, err := secret.New(bytes.Repeat([]byte{fill}, secret.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSealEnv(t *testing.T) {
	t.Parallel()
	box := testBox(t, 1)
	spec := jobs.Spec{Language: "python", Code: "print(1)", Env: map[string]string{"TOKEN": "tok-SECRET-123", "A": "1"}}
	if err := spec.SealEnv(box, "ten_a", "job_1"); err != nil {
		t.Fatal(err)
	}
	stored, err := jobs.MarshalSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(stored, []byte("tok-SECRET-123")) || spec.Env != nil {
		t.Fatalf("the sealed spec shows a value: %s", stored)
	}
	if !bytes.Contains(stored, []byte(`"names":["A","TOKEN"]`)) {
		t.Errorf("the sealed spec does not name the variables: %s", stored)
	}

	var back jobs.Spec
	if err := json.Unmarshal(stored, &back); err != nil {
		t.Fatal(err)
	}
	if got := back.EnvNames(); !reflect.DeepEqual(got, []string{"A", "TOKEN"}) {
		t.Errorf("names = %v", got)
	}
	// Bound to its job and tenant, and to the key.
	for _, c := range []struct {
		box            jobs.Sealer
		tenant, job    string
		wantErrContain string
	}{
		{box, "ten_a", "job_2", "does not open"},
		{box, "ten_b", "job_1", "does not open"},
		{testBox(t, 2), "ten_a", "job_1", "does not open"},
		{nil, "ten_a", "job_1", "no GANTRY_SECRET_KEY"},
	} {
		cp := back
		if err := cp.OpenEnv(c.box, c.tenant, c.job); err == nil || !strings.Contains(err.Error(), c.wantErrContain) {
			t.Errorf("open as %s/%s: %v, want an error saying %q", c.tenant, c.job, err, c.wantErrContain)
		}
	}
	if err := back.OpenEnv(box, "ten_a", "job_1"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Env, map[string]string{"TOKEN": "tok-SECRET-123", "A": "1"}) || back.SealedEnv != nil {
		t.Errorf("opened env = %v (sealed %v)", back.Env, back.SealedEnv)
	}

	// A spec stored with its env in the clear opens without a box.
	var plain jobs.Spec
	if err := json.Unmarshal([]byte(`{"language":"bash","code":"env","env":{"B":"2","A":"1"},"timeout_ms":1,"limits":{},"artifacts":[]}`), &plain); err != nil {
		t.Fatal(err)
	}
	if err := plain.OpenEnv(nil, "ten_a", "job_1"); err != nil || plain.Env["B"] != "2" {
		t.Errorf("plain env: %v %v", plain.Env, err)
	}
	if got := plain.EnvNames(); !reflect.DeepEqual(got, []string{"A", "B"}) {
		t.Errorf("plain names = %v", got)
	}
	// No env: nothing sealed, nothing stored.
	empty := jobs.Spec{Language: "bash", Code: "true"}
	if err := empty.SealEnv(box, "ten_a", "job_3"); err != nil || empty.SealedEnv != nil {
		t.Errorf("empty env sealed: %+v %v", empty.SealedEnv, err)
	}
}

func TestSpecView(t *testing.T) {
	t.Parallel()
	spec := jobs.Spec{
		Language: "python", Command: []string{"python3", "main.py"},
		Files: []jobs.SpecFile{{Path: "main.py", Content: []byte("print(1)\n")}, {Path: "data/x.bin", Content: []byte{0, 1, 2}}},
		Stdin: "\x00\xff", Env: map[string]string{"SECRET": "value-never-shown"},
		TimeoutMS: 1000, Limits: jobs.Limits{MemoryMB: 256}, Artifacts: []string{"out/**"},
	}
	v := spec.View()
	data, _ := json.Marshal(v)
	if strings.Contains(string(data), "value-never-shown") || strings.Contains(string(data), "print(1)") {
		t.Fatalf("the view shows an env value or a file's content: %s", data)
	}
	want := jobs.JobSpec{
		Command: []string{"python3", "main.py"},
		Files:   []jobs.FileInfo{{Path: "main.py", Size: 9}, {Path: "data/x.bin", Size: 3}},
		Stdin:   "AP8=", StdinEncoding: "base64", EnvNames: []string{"SECRET"},
		TimeoutMS: 1000, Limits: jobs.Limits{MemoryMB: 256}, Artifacts: []string{"out/**"},
		Environment: jobs.DefaultEnvironment,
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("view = %+v\nwant   %+v", v, want)
	}
}
