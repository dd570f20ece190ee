package jobs

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// Sealer seals and opens values at rest under the operator's key
// (secret.Box is one). Open fails for a value sealed under another key or
// another context.
type Sealer interface {
	Seal(plaintext []byte, context string) ([]byte, error)
	Open(sealed []byte, context string) ([]byte, error)
}

// SealedEnv is a job's environment as it is stored when the server has a
// secret key: the names in the clear (the API shows them), the values
// sealed together, bound to the job's tenant and id.
type SealedEnv struct {
	Names []string `json:"names"`
	Box   []byte   `json:"box"`
}

// envContext binds a job's sealed env to its row: a sealed value copied to
// another job or tenant does not open.
func envContext(tenantID, jobID string) string { return "job-env:" + tenantID + ":" + jobID }

// SealEnv moves the spec's env values into SealedEnv, sealed for the job
// jobID of tenantID. A spec without env is left as it is.
func (s *Spec) SealEnv(box Sealer, tenantID, jobID string) error {
	if len(s.Env) == 0 {
		return nil
	}
	plain, err := json.Marshal(s.Env)
	if err != nil {
		return err
	}
	sealed, err := box.Seal(plain, envContext(tenantID, jobID))
	if err != nil {
		return fmt.Errorf("seal env: %w", err)
	}
	s.SealedEnv = &SealedEnv{Names: s.EnvNames(), Box: sealed}
	s.Env = nil
	return nil
}

// OpenEnv restores the values SealEnv sealed. A spec stored with its env
// in the clear (written without a key, or before env was sealed) needs no
// box and is left as it is.
func (s *Spec) OpenEnv(box Sealer, tenantID, jobID string) error {
	if s.SealedEnv == nil {
		return nil
	}
	if box == nil {
		return errors.New("the job's env is sealed, and this process has no GANTRY_SECRET_KEY to open it")
	}
	plain, err := box.Open(s.SealedEnv.Box, envContext(tenantID, jobID))
	if err != nil {
		return fmt.Errorf("open the job's env: %w", err)
	}
	var env map[string]string
	if err := json.Unmarshal(plain, &env); err != nil {
		return fmt.Errorf("decode the job's env: %w", err)
	}
	s.Env, s.SealedEnv = env, nil
	return nil
}

// EnvNames lists the names of the job's environment variables, sorted,
// whether the values are sealed or not.
func (s *Spec) EnvNames() []string {
	if s.SealedEnv != nil {
		return slices.Clone(s.SealedEnv.Names)
	}
	names := make([]string, 0, len(s.Env))
	for k := range s.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// JobSpec is what a job ran, as GET /v1/jobs?include=spec shows it: the
// program, its input and limits. Environment variables are shown by name
// only, never their values; files by path and size, not their content.
type JobSpec struct {
	Code    string     `json:"code,omitempty"`
	Command []string   `json:"command,omitempty"`
	Args    []string   `json:"args,omitempty"`
	Files   []FileInfo `json:"files"`
	Stdin   string     `json:"stdin"`
	// StdinEncoding is "utf8", or "base64" when the input is binary (Stdin
	// is then its base64).
	StdinEncoding string   `json:"stdin_encoding"`
	EnvNames      []string `json:"env_names"`
	TimeoutMS     int      `json:"timeout_ms"`
	// CompileTimeoutMS bounds the compile step (compiled languages only).
	CompileTimeoutMS int      `json:"compile_timeout_ms,omitempty"`
	Limits           Limits   `json:"limits"`
	Artifacts        []string `json:"artifacts"`
	// Compat is a compatible API's own data (Request.Compat), for the
	// adapter that stored it; not part of the HTTP API.
	Compat json.RawMessage `json:"-"`
	// Environment is the environment it ran in ("default": the runner's
	// own image).
	Environment string `json:"environment"`
	// Kernel is the stateful session's kernel it ran in, when the request
	// named one (Request.Kernel).
	Kernel string `json:"kernel,omitempty"`
}

// FileInfo names an input file of a job, with its size in bytes.
type FileInfo struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// View is what the API shows of the spec (see JobSpec).
func (s *Spec) View() JobSpec {
	v := JobSpec{
		Code: s.Code, Command: slices.Clone(s.Command), Args: slices.Clone(s.Args), Files: make([]FileInfo, len(s.Files)),
		Stdin: s.Stdin, StdinEncoding: "utf8", EnvNames: s.EnvNames(),
		TimeoutMS: s.TimeoutMS, CompileTimeoutMS: s.CompileTimeoutMS, Limits: s.Limits, Artifacts: slices.Clone(s.Artifacts), Compat: s.Compat,
		Environment: DefaultEnvironment, Kernel: s.Kernel,
	}
	if s.Environment != "" {
		v.Environment = s.Environment
	}
	for i, f := range s.Files {
		v.Files[i] = FileInfo{Path: f.Path, Size: int64(len(f.Content))}
	}
	if !utf8.ValidString(s.Stdin) || strings.ContainsRune(s.Stdin, 0) {
		v.Stdin, v.StdinEncoding = base64.StdEncoding.EncodeToString([]byte(s.Stdin)), "base64"
	}
	if v.Artifacts == nil {
		v.Artifacts = []string{}
	}
	return v
}
