package chat

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantryhq/gantry/ingress/contracttest"
	"github.com/gantryhq/gantry/localapi"
)

// scripted is an OpenAI-compatible chat-completions server that answers
// from a script: each model call takes the next reply. It records what it
// was sent.
type scripted struct {
	mu      sync.Mutex
	replies []Message
	got     []modelRequest
	auth    []string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	var req modelRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.got = append(s.got, req)
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	if len(s.replies) == 0 {
		s.mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error": {"message": "the script ran out"}}`)
		return
	}
	m := s.replies[0]
	s.replies = s.replies[1:]
	s.mu.Unlock()
	finish := "stop"
	if len(m.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	usage := &Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}
	if !req.Stream {
		writeJSON(w, http.StatusOK, Completion{ID: "x", Object: "chat.completion", Model: req.Model,
			Choices: []Choice{{Message: m, FinishReason: finish}}, Usage: usage})
		return
	}
	// Streamed as real servers do: text in pieces, each tool call's id and
	// name first, then its arguments in two pieces.
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(c Chunk) {
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	words := strings.SplitAfter(string(m.Content), " ")
	for _, wd := range words {
		if wd != "" {
			send(Chunk{Choices: []ChunkChoice{{Delta: Delta{Content: wd}}}})
		}
	}
	for i, tc := range m.ToolCalls {
		idx := i
		half := len(tc.Function.Arguments) / 2
		send(Chunk{Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCall{{Index: &idx, ID: tc.ID, Type: "function", Function: FunctionCall{Name: tc.Function.Name}}}}}}})
		send(Chunk{Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCall{{Index: &idx, Function: FunctionCall{Arguments: tc.Function.Arguments[:half]}}}}}}})
		send(Chunk{Choices: []ChunkChoice{{Delta: Delta{ToolCalls: []ToolCall{{Index: &idx, Function: FunctionCall{Arguments: tc.Function.Arguments[half:]}}}}}}})
	}
	send(Chunk{Choices: []ChunkChoice{{FinishReason: &finish}}})
	send(Chunk{Choices: []ChunkChoice{}, Usage: usage})
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

func call(id, name, args string) ToolCall {
	return ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: name, Arguments: args}}
}

// fakeAPI stands in for the ingress's handler: it answers the calls the
// tools make, for the key "gk_good" only, and records them.
type fakeAPI struct {
	mu      sync.Mutex
	calls   []string
	stopped bool // a download stopped early: its request was cancelled
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.calls = append(f.calls, r.Method+" "+r.URL.RequestURI())
	f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer gk_good" {
		writeError(w, http.StatusUnauthorized, "unauthenticated", "", "invalid or revoked API key")
		return
	}
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/execute":
		var req map[string]any
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req["language"] != "python" {
			writeError(w, http.StatusBadRequest, "invalid_argument", "language", fmt.Sprintf("language must be one of python, bash, node, not %q", req["language"]))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": "job_1", "status": "succeeded", "exit_code": 0, "stdout": "42\n", "stderr": "",
			"artifacts": []map[string]any{{"path": "out/figure-1.png", "size": 2048, "sha256": strings.Repeat("ab", 32), "content_type": "image/png", "url": "/v1/jobs/job_1/artifacts/out/figure-1.png"}}})
	case r.Method == "GET" && r.URL.Path == "/v1/skills":
		writeJSON(w, http.StatusOK, map[string]any{"skills": []map[string]any{{"name": "plotting", "description": "matplotlib charts saved to out/"}}})
	case r.Method == "GET" && r.URL.Path == "/v1/sessions/ses_1/files/notes/a b.txt":
		_, _ = io.WriteString(w, "hello from the session\n")
	case r.Method == "GET" && r.URL.Path == "/v1/sessions/ses_1/files/big.log":
		// A file far larger than the agent shows, written as the files
		// API does (a Content-Length, then the bytes), stopping when the
		// request is cancelled.
		const size = 64 << 20
		w.Header().Set("Content-Length", fmt.Sprint(size))
		line := []byte(strings.Repeat("x", 1023) + "\n")
		for sent := 0; sent < size; sent += len(line) {
			if r.Context().Err() != nil {
				f.mu.Lock()
				f.stopped = true
				f.mu.Unlock()
				panic(http.ErrAbortHandler)
			}
			_, _ = w.Write(line)
		}
	default:
		writeError(w, http.StatusNotFound, "not_found", "", "route "+r.Method+" "+r.URL.Path+" not found")
	}
}

func newAgent(t *testing.T, model *scripted, steps int) (*Loop, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(model)
	t.Cleanup(srv.Close)
	a, err := New(Config{URL: srv.URL + "/v1/", Model: "scripted-model", APIKey: "sk-model-secret", MaxSteps: steps}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return a, srv
}

func TestRunCallsToolsThenAnswers(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			model := &scripted{replies: []Message{
				{Role: "assistant", Content: "Let me look. ", ToolCalls: []ToolCall{
					call("c1", "search_skills", `{"query": "chart"}`),
					call("c2", "execute_code", `{"language": "python", "code": "print(6*7)"}`),
				}},
				{Role: "assistant", ToolCalls: []ToolCall{call("c3", "read_file", `{"session_id": "ses_1", "path": "notes/a b.txt"}`)}},
				{Role: "assistant", Content: "The answer is 42, and the plot is in out/figure-1.png."},
			}}
			a, _ := newAgent(t, model, 10)
			api := &fakeAPI{}
			var text strings.Builder
			var events []Event
			sink := Sink{Event: func(e Event) { events = append(events, e) }}
			if stream {
				sink.Text = func(s string) { text.WriteString(s) }
			}
			run, err := a.Run(context.Background(), localapi.New(api, "gk_good"), []Message{{Role: "user", Content: "What is 6*7? Plot it."}}, Options{}, sink)
			if err != nil {
				t.Fatal(err)
			}
			want := "Let me look. The answer is 42, and the plot is in out/figure-1.png."
			if run.Content != want || run.FinishReason != "stop" || run.Trace.Steps != 3 {
				t.Fatalf("run = %q, %s, %d steps", run.Content, run.FinishReason, run.Trace.Steps)
			}
			if stream && text.String() != want {
				t.Errorf("streamed text %q, want %q", text.String(), want)
			}
			if run.Usage.TotalTokens != 45 {
				t.Errorf("usage %+v: want the sum of three calls", run.Usage)
			}
			wantCalls := []string{
				"GET /v1/skills?limit=8&q=chart",
				"POST /v1/execute",
				"GET /v1/sessions/ses_1/files/notes/a%20b.txt",
			}
			if strings.Join(api.calls, "\n") != strings.Join(wantCalls, "\n") {
				t.Errorf("API calls:\n%s\nwant:\n%s", strings.Join(api.calls, "\n"), strings.Join(wantCalls, "\n"))
			}
			// Each call is announced, then reported with its result.
			if len(events) != 6 || events[0].Type != "tool_call" || events[1].Type != "tool_result" || events[3].Name != "execute_code" {
				t.Fatalf("events: %+v", events)
			}
			exec := events[3]
			if exec.JobID != "job_1" || exec.Status != "succeeded" || len(exec.Artifacts) != 1 || exec.Artifacts[0].Path != "out/figure-1.png" || !*exec.OK {
				t.Errorf("execute_code result: %+v", exec)
			}
			if !strings.Contains(events[5].Result, "hello from the session") {
				t.Errorf("read_file result: %q", events[5].Result)
			}
			// The model saw the tools, and each tool result came back to it
			// under its call's id; the model server got its own key.
			last := model.got[2]
			if len(last.Tools) != len(toolSpecs) || last.Model != "scripted-model" || model.auth[0] != "Bearer sk-model-secret" {
				t.Errorf("model request: %d tools, model %q, auth %q", len(last.Tools), last.Model, model.auth[0])
			}
			var toolMsgs []Message
			for _, m := range last.Messages {
				if m.Role == "tool" {
					toolMsgs = append(toolMsgs, m)
				}
			}
			if len(toolMsgs) != 3 || toolMsgs[1].ToolCallID != "c2" || !strings.Contains(string(toolMsgs[1].Content), `"stdout":"42\n"`) {
				t.Errorf("tool messages sent back: %+v", toolMsgs)
			}
			if last.Messages[0].Role != "system" || !strings.Contains(string(last.Messages[0].Content), "execute_code") {
				t.Errorf("no system prompt first: %+v", last.Messages[0])
			}
		})
	}
}

func TestToolErrorsGoBackToTheModel(t *testing.T) {
	model := &scripted{replies: []Message{
		{Role: "assistant", ToolCalls: []ToolCall{
			call("c1", "execute_code", `{"language": "ruby", "code": "puts 1"}`),
			call("c2", "execute_code", `{"lang": "python"}`),
			call("c3", "rm_rf", `{}`),
			call("c4", "get_skill", `not json`),
		}},
		{Role: "assistant", Content: "Sorry."},
	}}
	a, _ := newAgent(t, model, 10)
	var results []string
	run, err := a.Run(context.Background(), localapi.New(&fakeAPI{}, "gk_good"), []Message{{Role: "user", Content: "x"}}, Options{},
		Sink{Event: func(e Event) {
			if e.Type == "tool_result" {
				if *e.OK {
					t.Errorf("%s succeeded", e.Name)
				}
				results = append(results, e.Result)
			}
		}})
	if err != nil || run.Content != "Sorry." {
		t.Fatalf("run %+v, %v", run, err)
	}
	want := []string{
		`error: language must be one of python, bash, node, not "ruby"`,
		`error: bad arguments: json: unknown field "lang"`,
		`error: unknown tool "rm_rf"`,
		`error: bad arguments: invalid character`,
	}
	for i, w := range want {
		if i >= len(results) || !strings.HasPrefix(results[i], w) {
			t.Errorf("result %d = %q, want it to start with %q", i, results, w)
		}
	}
}

func TestStepBudget(t *testing.T) {
	for _, tc := range []struct {
		name              string
		configured, asked int
		wantSteps         int
	}{
		{"configured", 3, 0, 3},
		{"asked for fewer", 5, 2, 2},
		{"asked for more", 2, 50, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A model that never stops asking for code.
			model := &scripted{}
			for i := range 60 {
				model.replies = append(model.replies, Message{Role: "assistant", ToolCalls: []ToolCall{
					call(fmt.Sprint("c", i), "execute_code", `{"language": "python", "code": "print(1)"}`)}})
			}
			a, _ := newAgent(t, model, tc.configured)
			api := &fakeAPI{}
			var text strings.Builder
			run, err := a.Run(context.Background(), localapi.New(api, "gk_good"), []Message{{Role: "user", Content: "loop"}},
				Options{MaxSteps: tc.asked}, Sink{Text: func(s string) { text.WriteString(s) }})
			if err != nil {
				t.Fatal(err)
			}
			if len(model.got) != tc.wantSteps || run.Trace.Steps != tc.wantSteps || run.FinishReason != "length" {
				t.Fatalf("%d model calls, %d steps, finish %q; want %d and length", len(model.got), run.Trace.Steps, run.FinishReason, tc.wantSteps)
			}
			// The last step's calls are not run: their results would reach no one.
			if len(api.calls) != tc.wantSteps-1 || len(run.Trace.ToolCalls) != tc.wantSteps-1 {
				t.Errorf("%d tools run, want %d", len(api.calls), tc.wantSteps-1)
			}
			if !strings.Contains(text.String(), fmt.Sprintf("step budget of %d model calls", tc.wantSteps)) {
				t.Errorf("streamed text %q does not say the budget stopped it", text.String())
			}
		})
	}
}

func TestModelFailures(t *testing.T) {
	// The model server's key never appears in what a client sees.
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error": {"message": "Incorrect API key provided: sk-model-secret"}}`)
	}))
	defer down.Close()
	a, err := New(Config{URL: down.URL + "/v1", Model: "m", APIKey: "sk-model-secret"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Run(context.Background(), localapi.New(&fakeAPI{}, "gk_good"), []Message{{Role: "user", Content: "hi"}}, Options{}, Sink{})
	if !isModelError(err) || !strings.Contains(err.Error(), "answered 401") || strings.Contains(err.Error(), "sk-model-secret") {
		t.Fatalf("err = %v", err)
	}

	// An unreachable server: the client is told so, without its address
	// (it is in the log).
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	a, _ = New(Config{URL: closed.URL, Model: "m"}, slog.New(slog.DiscardHandler))
	_, err = a.Run(context.Background(), localapi.New(&fakeAPI{}, "gk_good"), []Message{{Role: "user", Content: "hi"}}, Options{}, Sink{Text: func(string) {}})
	host := strings.TrimPrefix(closed.URL, "http://")
	var me *ModelError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "cannot reach the model server") || strings.Contains(err.Error(), host) || !strings.Contains(me.Detail, host) {
		t.Fatalf("err = %v (detail %q)", err, me.Detail)
	}

	// A server's long error message is cut.
	long := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, strings.Repeat("upstream trace ", 200))
	}))
	defer long.Close()
	a, _ = New(Config{URL: long.URL, Model: "m"}, slog.New(slog.DiscardHandler))
	_, err = a.Run(context.Background(), localapi.New(&fakeAPI{}, "gk_good"), []Message{{Role: "user", Content: "hi"}}, Options{}, Sink{})
	if !isModelError(err) || len(err.Error()) > maxModelMessage+100 {
		t.Fatalf("err (%d bytes) = %.200v", len(err.Error()), err)
	}
}

// TestReadFileReadsOnlyItsStart: read_file shows the start of a large file
// and stops the download there, instead of holding the file in memory.
func TestReadFileReadsOnlyItsStart(t *testing.T) {
	api := &fakeAPI{}
	res := runTool(context.Background(), localapi.New(api, "gk_good"), call("c1", "read_file", `{"session_id": "ses_1", "path": "big.log"}`))
	if !res.OK || len(res.Content) > maxFileRead+100 || !strings.Contains(res.Content, fmt.Sprintf("cut: the file has %d bytes", 64<<20)) {
		t.Fatalf("ok %v, %d bytes: %.100q … %q", res.OK, len(res.Content), res.Content, res.Content[max(0, len(res.Content)-80):])
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if !api.stopped {
		t.Error("the download ran to its end after the part shown was read")
	}
}

// TestRunLimits: a whole run has a deadline, and a request's max_tokens is
// held to the operator's cap.
func TestRunLimits(t *testing.T) {
	model := &scripted{replies: []Message{{Role: "assistant", Content: "done"}}}
	srv := httptest.NewServer(model)
	defer srv.Close()
	a, err := New(Config{URL: srv.URL + "/v1", Model: "m", MaxTokens: 256}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	asked := 100000
	if _, err := a.Run(context.Background(), localapi.New(&fakeAPI{}, "gk_good"), []Message{{Role: "user", Content: "hi"}}, Options{MaxTokens: &asked}, Sink{}); err != nil {
		t.Fatal(err)
	}
	if got := model.got[0].MaxTokens; got == nil || *got != 256 {
		t.Errorf("max_tokens sent to the model: %v, want 256", got)
	}

	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer slow.Close()
	defer close(release)
	a, _ = New(Config{URL: slow.URL, Model: "m", RunTimeout: 200 * time.Millisecond}, slog.New(slog.DiscardHandler))
	_, err = a.Run(context.Background(), localapi.New(&fakeAPI{}, "gk_good"), []Message{{Role: "user", Content: "hi"}}, Options{}, Sink{})
	if !isModelError(err) || !strings.Contains(err.Error(), "GANTRY_LLM_RUN_TIMEOUT") {
		t.Fatalf("err = %v", err)
	}
}

// post calls the endpoint as the ingress would, with key. The request and
// the answer are checked against the API's OpenAPI document.
func post(t *testing.T, a *Loop, api http.Handler, key, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/agent/chat/completions", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+key)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	contracttest.Handler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.ServeChatCompletions(w, r, api)
	})).ServeHTTP(w, r)
	return w
}

func TestEndpointWhole(t *testing.T) {
	model := &scripted{replies: []Message{
		{Role: "assistant", ToolCalls: []ToolCall{call("c1", "execute_code", `{"language": "python", "code": "print(6*7)"}`)}},
		{Role: "assistant", Content: "42"},
	}}
	a, _ := newAgent(t, model, 10)
	w := post(t, a, &fakeAPI{}, "gk_good", `{"model": "anything", "messages": [{"role": "user", "content": [{"type": "text", "text": "6*7?"}]}], "top_p": 1, "user": "u1"}`)
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var c Completion
	if err := json.Unmarshal(w.Body.Bytes(), &c); err != nil {
		t.Fatal(err)
	}
	if c.Object != "chat.completion" || c.Model != "scripted-model" || len(c.Choices) != 1 || c.Choices[0].Message.Content != "42" ||
		c.Choices[0].FinishReason != "stop" || c.Gantry == nil || c.Gantry.Steps != 2 || len(c.Gantry.ToolCalls) != 1 || c.Gantry.ToolCalls[0].JobID != "job_1" {
		t.Fatalf("completion: %s", w.Body)
	}
	if got := model.got[0].Messages[1].Content; got != "6*7?" {
		t.Errorf("the model got the user's text as %q", got)
	}
}

func TestEndpointStream(t *testing.T) {
	model := &scripted{replies: []Message{
		{Role: "assistant", Content: "Running it. ", ToolCalls: []ToolCall{call("c1", "execute_code", `{"language": "python", "code": "print(6*7)"}`)}},
		{Role: "assistant", Content: "It printed 42."},
	}}
	a, _ := newAgent(t, model, 10)
	w := post(t, a, &fakeAPI{}, "gk_good", `{"model": "m", "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "6*7?"}]}`)
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %s", w.Code, w.Header())
	}
	var text strings.Builder
	var kinds []string
	var finish string
	done := false
	sc := bufio.NewScanner(w.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c Chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if c.Object != "chat.completion.chunk" {
			t.Errorf("object %q", c.Object)
		}
		if c.Gantry != nil {
			kinds = append(kinds, c.Gantry.Type+":"+c.Gantry.Name)
			continue
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
		if c.Usage != nil && c.Usage.TotalTokens != 30 {
			t.Errorf("usage %+v", c.Usage)
		}
	}
	if !done || finish != "stop" || text.String() != "Running it. It printed 42." || strings.Join(kinds, ",") != "tool_call:execute_code,tool_result:execute_code" {
		t.Fatalf("done %v, finish %q, text %q, events %v", done, finish, text.String(), kinds)
	}
	// The client's system message follows gantry's, in one message.
	if m := model.got[0].Messages; !strings.Contains(string(m[0].Content), "execute_code") || !strings.HasSuffix(string(m[0].Content), "\n\nBe brief.") || len(m) != 2 {
		t.Errorf("model got %+v", m)
	}
}

func TestEndpointRefusals(t *testing.T) {
	model := &scripted{}
	a, _ := newAgent(t, model, 10)
	for _, tc := range []struct{ body, field string }{
		{`{}`, "messages"},
		{`{"messages": []}`, "messages"},
		{`[1]`, "body"},
		{`{"messages": "hi"}`, "messages"},
		{`{"messages": [{"role": "robot", "content": "x"}]}`, "messages[0].role"},
		{`{"messages": [{"role": "tool", "content": "x", "tool_call_id": "a"}]}`, "messages[0].role"},
		{`{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, "body"},
		{`{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}`, "tools"},
		{`{"messages": [{"role": "user", "content": "x"}], "n": 2}`, "n"},
		{`{"messages": [{"role": "user", "content": "x"}], "max_steps": -1}`, "max_steps"},
	} {
		w := post(t, a, &fakeAPI{}, "gk_good", tc.body)
		var e struct {
			Error struct{ Code, Field, Message, Type string }
		}
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != 400 || e.Error.Code != "invalid_argument" || e.Error.Field != tc.field || e.Error.Type != "invalid_request_error" {
			t.Errorf("%s: %d %s (want field %s)", tc.body, w.Code, w.Body, tc.field)
		}
	}
	if len(model.got) != 0 {
		t.Errorf("the model was called %d times for refused requests", len(model.got))
	}
	// A failing model is a 503 with its message.
	w := post(t, a, &fakeAPI{}, "gk_good", `{"messages": [{"role": "user", "content": "x"}]}`)
	if w.Code != 503 || !strings.Contains(w.Body.String(), "the script ran out") {
		t.Errorf("model failure: %d %s", w.Code, w.Body)
	}
}

// The tools act as the caller: with another key, the API refuses them, and
// the model reads the API's message.
func TestToolsActAsTheCaller(t *testing.T) {
	model := &scripted{replies: []Message{
		{Role: "assistant", ToolCalls: []ToolCall{call("c1", "search_skills", `{"query": "x"}`)}},
		{Role: "assistant", Content: "done"},
	}}
	a, _ := newAgent(t, model, 10)
	w := post(t, a, &fakeAPI{}, "gk_other", `{"messages": [{"role": "user", "content": "x"}]}`)
	var c Completion
	_ = json.Unmarshal(w.Body.Bytes(), &c)
	if w.Code != 200 || len(c.Gantry.ToolCalls) != 1 || c.Gantry.ToolCalls[0].Result != "error: invalid or revoked API key" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"messages": [{"role": "user", "content": "hi"}], "stream": true}`))
	f.Add([]byte(`{"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}], "max_steps": 3}`))
	f.Add([]byte(`{"messages": [{"role": "assistant", "content": null}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := DecodeRequest(b)
		if err != nil {
			return
		}
		if len(req.Messages) == 0 || len(req.Messages) > maxMessages || req.MaxSteps < 0 {
			t.Fatalf("accepted %q", b)
		}
		for _, m := range req.Messages {
			if m.Role != "system" && m.Role != "user" && m.Role != "assistant" {
				t.Fatalf("accepted role %q", m.Role)
			}
		}
	})
}

func FuzzReadStream(f *testing.F) {
	f.Add("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")
	f.Add("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"x\",\"arguments\":\"{\"}}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		rep, err := readStream(strings.NewReader(s), func(string) {})
		if err != nil {
			return
		}
		if len(rep.Message.ToolCalls) > maxToolCallsPerStep {
			t.Fatalf("%d tool calls", len(rep.Message.ToolCalls))
		}
	})
}
