// Package chat is gantry's agent loop: a conversation with an
// OpenAI-compatible model (vLLM, Ollama, a hosted API) that answers by
// running code and reading skills, tools and files in gantry, as the tenant
// who asked. It serves POST /v1/agent/chat/completions, an OpenAI-compatible
// endpoint (whole or streamed answers), which the console's playground uses
// too; the loop runs server-side and stops at a step budget.
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/localapi"
)

// Config configures the loop and the model it talks to.
type Config struct {
	// URL is the model server's OpenAI-compatible base URL, the one OpenAI
	// clients call base_url (e.g. http://127.0.0.1:11434/v1);
	// /chat/completions is added.
	URL string
	// Model is the model's name on that server.
	Model string
	// APIKey is sent as a bearer token ("": none). Never logged.
	APIKey string
	// MaxSteps caps the model calls of one request (default 10); a request
	// may ask for fewer with max_steps.
	MaxSteps int
	// Timeout bounds one model call (default 2 minutes).
	Timeout time.Duration
	// RunTimeout bounds a whole request: every model call and tool call
	// of it (default 15 minutes).
	RunTimeout time.Duration
	// MaxTokens caps what a request may ask the model for with max_tokens
	// (0: no cap; a request above it is clamped).
	MaxTokens int
	// Client makes the model calls (default: a client without a timeout of
	// its own; Timeout applies per call).
	Client *http.Client
}

// WithDefaults fills in zero fields.
func (c Config) WithDefaults() Config {
	if c.MaxSteps == 0 {
		c.MaxSteps = 10
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.RunTimeout == 0 {
		c.RunTimeout = 15 * time.Minute
	}
	if c.Client == nil {
		c.Client = &http.Client{}
	}
	return c
}

// Loop runs conversations: the agent loop. It is safe for concurrent use.
type Loop struct {
	cfg   Config
	log   *slog.Logger
	model *model
}

// New returns a Loop for cfg, which must name a URL and a model.
func New(cfg Config, log *slog.Logger) (*Loop, error) {
	cfg = cfg.WithDefaults()
	if cfg.URL == "" || cfg.Model == "" {
		return nil, errors.New("the agent needs a model server URL and a model name")
	}
	if !strings.HasPrefix(cfg.URL, "http://") && !strings.HasPrefix(cfg.URL, "https://") {
		return nil, fmt.Errorf("model server URL %q: want http:// or https://", cfg.URL)
	}
	return &Loop{cfg: cfg, log: log, model: &model{
		url: strings.TrimRight(cfg.URL, "/") + "/chat/completions", name: cfg.Model, apiKey: cfg.APIKey, client: cfg.Client,
	}}, nil
}

// Model is the configured model's name.
func (a *Loop) Model() string { return a.cfg.Model }

// Event is the loop's progress, streamed to clients as the gantry field of
// a chunk.
type Event struct {
	// Type is "tool_call" (about to run) or "tool_result" (done).
	Type string `json:"type"`
	// Step is the model call (from 1) that asked for the tool.
	Step int    `json:"step"`
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments are the call's arguments as the model wrote them.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// The rest are set on tool_result.
	OK        *bool           `json:"ok,omitempty"`
	Result    string          `json:"result,omitempty"`
	JobID     string          `json:"job_id,omitempty"`
	Status    jobs.Status     `json:"status,omitempty"`
	Artifacts []jobs.Artifact `json:"artifacts,omitempty"`
}

// Trace is what a whole run did: in non-streamed answers, the gantry field.
type Trace struct {
	Steps     int     `json:"steps"`
	ToolCalls []Event `json:"tool_calls"`
}

// Run is a finished conversation turn.
type Run struct {
	Content string
	// FinishReason is "stop", or "length" when the step budget ran out.
	FinishReason string
	Usage        Usage
	Trace        Trace
}

// Sink receives a run's progress as it happens. Either may be nil.
type Sink struct {
	Text  func(string)
	Event func(Event)
}

// Run carries the conversation msgs forward until the model answers without
// asking for a tool, or maxSteps model calls were made. Tools run through
// api, as its tenant. Errors are the model's (*ModelError) or ctx's.
func (a *Loop) Run(ctx context.Context, api *localapi.Client, msgs []Message, opt Options, sink Sink) (Run, error) {
	steps := a.cfg.MaxSteps
	if opt.MaxSteps > 0 && opt.MaxSteps < steps {
		steps = opt.MaxSteps
	}
	if a.cfg.MaxTokens > 0 && (opt.MaxTokens == nil || *opt.MaxTokens > a.cfg.MaxTokens) {
		limit := a.cfg.MaxTokens
		opt.MaxTokens = &limit
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, a.cfg.RunTimeout)
	defer cancel()
	// gantry's prompt comes first, with the client's own system message
	// after it in the same message (some models take only one).
	conv := make([]Message, 0, len(msgs)+1+2*steps)
	sys := systemPrompt
	if len(msgs) > 0 && msgs[0].Role == "system" {
		sys += "\n\n" + string(msgs[0].Content)
		msgs = msgs[1:]
	}
	conv = append(conv, Message{Role: "system", Content: Content(sys)})
	conv = append(conv, msgs...)
	var run Run
	run.Trace.ToolCalls = []Event{}
	for step := 1; ; step++ {
		callCtx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
		rep, err := a.model.complete(callCtx, modelRequest{Messages: conv, Tools: toolSpecs, Temperature: opt.Temperature, MaxTokens: opt.MaxTokens}, sink.Text)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return run, a.ended(parent, ctx)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				err = &ModelError{Message: fmt.Sprintf("the model did not answer within %s", a.cfg.Timeout)}
			}
			return run, err
		}
		run.Trace.Steps = step
		run.Usage.add(rep.Usage)
		run.Content += string(rep.Message.Content)
		if len(rep.Message.ToolCalls) == 0 {
			run.FinishReason = "stop"
			return run, nil
		}
		if step >= steps {
			// The budget is spent: the calls it asked for are not run, as
			// their results would reach no one.
			note := fmt.Sprintf("\n\n[gantry stopped the agent: the step budget of %d model calls is used up]", steps)
			if sink.Text != nil {
				sink.Text(note)
			}
			run.Content += note
			run.FinishReason = "length"
			return run, nil
		}
		if len(rep.Message.ToolCalls) > maxToolCallsPerStep {
			rep.Message.ToolCalls = rep.Message.ToolCalls[:maxToolCallsPerStep]
		}
		for i := range rep.Message.ToolCalls {
			tc := &rep.Message.ToolCalls[i]
			tc.Index, tc.Type = nil, "function"
			if tc.ID == "" {
				tc.ID = fmt.Sprintf("call_%d_%d", step, i)
			}
		}
		conv = append(conv, rep.Message)
		for _, tc := range rep.Message.ToolCalls {
			ev := Event{Type: "tool_call", Step: step, ID: tc.ID, Name: tc.Function.Name, Arguments: rawArgs(tc.Function.Arguments)}
			if sink.Event != nil {
				sink.Event(ev)
			}
			res := runTool(ctx, api, tc)
			if ctx.Err() != nil {
				return run, a.ended(parent, ctx)
			}
			ok := res.OK
			ev.Type, ev.OK, ev.Result, ev.JobID, ev.Status, ev.Artifacts = "tool_result", &ok, res.Content, res.JobID, res.Status, res.Artifacts
			if sink.Event != nil {
				sink.Event(ev)
			}
			run.Trace.ToolCalls = append(run.Trace.ToolCalls, ev)
			conv = append(conv, Message{Role: "tool", ToolCallID: tc.ID, Name: tc.Function.Name, Content: Content(res.Content)})
		}
	}
}

// ended is why a run's context ended: the client's (parent's) error, or
// the run's own time limit, a *ModelError the client is told about.
func (a *Loop) ended(parent, run context.Context) error {
	if parent.Err() != nil {
		return parent.Err()
	}
	return &ModelError{Message: fmt.Sprintf("the agent did not finish within %s (GANTRY_LLM_RUN_TIMEOUT)", a.cfg.RunTimeout)}
}

// Options are a request's own settings.
type Options struct {
	MaxSteps    int
	Temperature *float64
	MaxTokens   *int
}

// rawArgs is a call's arguments as JSON when they are, else as a string.
func rawArgs(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

const systemPrompt = `You are an agent that answers by running code in gantry, a sandbox for code execution.
Use execute_code to compute, analyse data and draw charts instead of guessing: Python (numpy, pandas, scipy, matplotlib, sympy, seaborn, scikit-learn, statsmodels, plotly), bash or Node.
The sandbox has no network. Files written under out/ are returned as artifacts; matplotlib figures left open are saved to out/ by themselves and shown to the user.
Print only what the answer needs. Before writing code for a common task, search_skills may find a skill with tested helpers (read it with get_skill; it is mounted at /skills/<name>/).
Code can call the upstream tools that search_tools finds. In a session (session_id), files persist between runs: list_files and read_file read them.
When you have the answer, reply in plain prose, briefly.`
