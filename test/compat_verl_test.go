package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// verl's SandboxFusion client (verl/utils/reward_score/sandbox_fusion,
// utils.py), ported to Go so that make test sends exactly the requests
// verl sends and reads the answers as verl reads them: one POST to the
// configured URL per test case, with the same JSON body and headers, a
// timeout of compile + run + 10 s, up to 3 attempts retrying only 504
// (after 1 s, then 2 s), and the same verdicts: 1 (True: right answer),
// 0 (False: wrong answer), -1 (API or sandbox error), -2 (runtime error),
// -3 (timeout), -4 (compile error).

// verlOutcome is one test case's verdict and what verl's metadata records.
type verlOutcome struct {
	Result   int
	Status   string // success, wrong_answer, compile_error, runtime_error, timeout, sandbox_error, api_error, ...
	Stdout   *string
	APIError string
	Attempts int
}

// verlCall is call_sandbox_api: the response's JSON, or why there is none.
func verlCall(url, code string, stdin *string, compileTimeout, runTimeout, memoryMB int, language string) (map[string]any, string, int) {
	payload, _ := json.Marshal(struct {
		CompileTimeout int      `json:"compile_timeout"`
		RunTimeout     int      `json:"run_timeout"`
		Code           string   `json:"code"`
		Stdin          *string  `json:"stdin"`
		MemoryLimitMB  int      `json:"memory_limit_MB"`
		Language       string   `json:"language"`
		Files          struct{} `json:"files"`
		FetchFiles     []string `json:"fetch_files"`
	}{compileTimeout, runTimeout, code, stdin, memoryMB, language, struct{}{}, []string{}})
	client := &http.Client{Timeout: time.Duration(compileTimeout+runTimeout+10) * time.Second}
	var last string
	for attempt := range 3 {
		req, _ := http.NewRequest("POST", url, bytes.NewReader(payload))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return nil, "API Call Failed: API Request Error: " + err.Error(), attempt + 1
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusGatewayTimeout {
			last = fmt.Sprintf("API Call Failed: API Request Error: Gateway Timeout (504) on attempt %d/3", attempt+1)
			if attempt < 2 {
				time.Sleep(time.Duration(attempt+1) * time.Second)
			}
			continue
		}
		if resp.StatusCode/100 != 2 {
			return nil, fmt.Sprintf("API Call Failed: API Request Error: %d %s", resp.StatusCode, body), attempt + 1
		}
		var out map[string]any
		if err := json.Unmarshal(body, &out); err != nil {
			return nil, "API Call Failed: API Response JSON Decode Error: " + err.Error(), attempt + 1
		}
		return out, "", attempt + 1
	}
	return nil, last, 3
}

// verlCase is _process_single_case: one call, and verl's verdict on it.
func verlCase(url, code string, stdin *string, expected *string, timeout, memoryMB int, language string) verlOutcome {
	resp, apiErr, attempts := verlCall(url, code, stdin, timeout, timeout, memoryMB, language)
	out := verlOutcome{Result: -1, Status: "unknown", APIError: apiErr, Attempts: attempts}
	if apiErr != "" {
		out.Status = "api_error"
		return out
	}
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	compile, _ := resp["compile_result"].(map[string]any)
	run, _ := resp["run_result"].(map[string]any)
	if run != nil {
		if s, ok := run["stdout"].(string); ok {
			out.Stdout = &s
		}
	}
	nonZero := func(m map[string]any) bool { rc, ok := m["return_code"].(float64); return !ok || rc != 0 }
	switch str(resp, "status") {
	case "SandboxError":
		out.Status = "sandbox_error"
	case "Failed":
		switch {
		case compile != nil && (str(compile, "status") == "Error" || str(compile, "status") == "TimeLimitExceeded" ||
			(str(compile, "status") == "Finished" && nonZero(compile))):
			out.Status, out.Result = "compile_error", -4
			if str(compile, "status") == "TimeLimitExceeded" {
				out.Status = "compile_timeout"
			}
		case run != nil && str(run, "status") == "TimeLimitExceeded":
			out.Status, out.Result = "timeout", -3
		case run != nil && (str(run, "status") == "Error" || (str(run, "status") == "Finished" && nonZero(run))):
			out.Status, out.Result = "runtime_error", -2
		default:
			out.Status = "unknown_failure"
		}
	case "Success":
		if run == nil || str(run, "status") != "Finished" {
			out.Status = "unexpected_success_state"
			break
		}
		actual := ""
		if out.Stdout != nil {
			actual = *out.Stdout
		}
		if expected == nil || strings.TrimRight(actual, "\n") == strings.TrimRight(*expected, "\n") {
			out.Status, out.Result = "success", 1
		} else {
			out.Status, out.Result = "wrong_answer", 0
		}
	default:
		out.Status = "unknown_api_status_" + str(resp, "status")
	}
	return out
}

// verlCheck is check_correctness: every case at once (at most workers
// calls in flight, as its thread pool has), in order, with its compile
// error rule (a compile error marks every later case one too).
func verlCheck(url, code string, inputs []*string, outputs []*string, timeout int, language string, workers int) []verlOutcome {
	out := make([]verlOutcome, len(inputs))
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for i := range inputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = verlCase(url, code, inputs[i], outputs[i], timeout, 1024, language)
		}()
	}
	wg.Wait()
	for i := range out {
		if out[i].Result == -4 {
			for j := i + 1; j < len(out); j++ {
				out[j].Result = -4
			}
			break
		}
	}
	return out
}

func strp(s string) *string { return &s }

func strs(ss ...string) []*string {
	out := make([]*string, len(ss))
	for i := range ss {
		out[i] = &ss[i]
	}
	return out
}
