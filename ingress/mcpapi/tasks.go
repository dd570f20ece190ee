package mcpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/gantryhq/gantry/ingress/httpapi"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

// MCP tasks are jobs. A task-augmented execute_code call queues a job and
// answers with the job's id as the task id; tasks/get, tasks/result,
// tasks/cancel and tasks/list read and change the job in the store. So any
// ingress replica answers any task, the task outlives the replica that took
// the call, and nothing is kept in memory (mcp-go keeps its tasks in the
// memory of one process, so this file answers those methods before mcp-go
// sees them). Every job of the tenant is a task: tasks/get also answers for
// a job queued with submit_job or the HTTP API.
//
// Two generations of the protocol are spoken:
//   - 2025-11-25, where tasks are part of the core protocol: the client asks
//     for a task with params.task; tasks/get answers the task, tasks/result
//     waits for the tool result, tasks/list lists tasks.
//   - 2026-07-28 with the tasks extension (io.modelcontextprotocol/tasks):
//     the client declares the extension in the request's _meta and the
//     server decides. execute_code answers inline when the job ends within
//     Config.TaskInlineWait (5 s) and with a task handle otherwise (at once when the call
//     carries params.task); tasks/get carries the result once the task is
//     done; tasks/update has nothing to update (gantry never asks for
//     input) and is acknowledged; there is no tasks/result or tasks/list.

const (
	// extTasks is the tasks extension's identifier.
	extTasks = "io.modelcontextprotocol/tasks"
	// taskPollInterval is the polling interval suggested to clients.
	taskPollInterval = time.Second
	// taskTool is the one tool that runs as a task.
	taskTool = "execute_code"
)

// rpcRequest is the part of a JSON-RPC request the task router reads.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// taskParams are the params of the task methods and of a tools/call, as
// far as the router reads them.
type taskParams struct {
	TaskID string          `json:"taskId"`
	Cursor string          `json:"cursor"`
	Name   string          `json:"name"`
	Task   json.RawMessage `json:"task"`
	Meta   *mcp.Meta       `json:"_meta"`
}

// taskRequest is one request the router answers.
type taskRequest struct {
	s      *Server
	w      http.ResponseWriter
	r      *http.Request
	id     json.RawMessage
	method string
	params taskParams
	body   []byte
	p      service.Principal
	// modern: the request speaks 2026-07-28 or later.
	modern bool
}

// serveTask answers the request if it is a task request, and reports
// whether it did. Anything else, and any request malformed at the
// transport level (which mcp-go answers with the right error), is left to
// mcp-go.
func (s *Server) serveTask(w http.ResponseWriter, r *http.Request, body []byte, p service.Principal, sel toolsetSelection) bool {
	var msg rpcRequest
	if json.Unmarshal(body, &msg) != nil || msg.JSONRPC != mcp.JSONRPC_VERSION || len(msg.ID) == 0 || bytes.Equal(msg.ID, []byte("null")) {
		return false
	}
	switch msg.Method {
	case string(mcp.MethodToolsCall), string(mcp.MethodTasksGet), string(mcp.MethodTasksResult),
		string(mcp.MethodTasksCancel), string(mcp.MethodTasksList), methodTasksUpdate:
	default:
		return false
	}
	tr := &taskRequest{s: s, w: w, r: r, id: msg.ID, method: msg.Method, body: body, p: p}
	if len(msg.Params) > 0 && json.Unmarshal(msg.Params, &tr.params) != nil {
		return false
	}
	header := r.Header.Get(mcp.HeaderProtocolVersion)
	version := tr.params.Meta.ProtocolVersion()
	tr.modern = mcp.IsModernProtocol(version) || mcp.IsModernProtocol(header)
	if tr.modern {
		// What mcp-go checks of every modern request; a failure is its to
		// answer.
		if header != version || !mcp.IsValidProtocolVersion(version) || r.Header.Get(mcp.HeaderLastEventID) != "" ||
			tr.params.Meta.ClientCapabilities() == nil ||
			mcp.ValidateStandardHeaders(r.Header.Get, version, mcp.MCPMethod(msg.Method), msg.Params) != nil {
			return false
		}
	} else if header != "" && !mcp.IsValidProtocolVersion(header) {
		return false
	}
	declared := tr.modern && declaresTasks(tr.params.Meta)

	switch msg.Method {
	case string(mcp.MethodToolsCall):
		if tr.params.Name != taskTool || !sel.has(toolsetCode) {
			return false
		}
		asked := len(tr.params.Task) > 0 && !bytes.Equal(tr.params.Task, []byte("null"))
		switch {
		case !tr.modern && asked:
			s.createTask(tr, true)
		case tr.modern && !declared && asked:
			tr.fail(mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, "a task needs the "+extTasks+" extension: declare it in the request's client capabilities")
		case tr.modern && declared && (asked || tr.params.Meta.ProgressToken == nil):
			// A call with a progress token wants its output streamed: it
			// runs as a plain call (mcp-go), unless it asked for a task.
			s.createTask(tr, asked)
		default:
			return false
		}
		return true
	case string(mcp.MethodTasksResult), string(mcp.MethodTasksList):
		if tr.modern {
			return false // removed in 2026-07-28: mcp-go says so
		}
	case methodTasksUpdate:
		if !tr.modern {
			return false
		}
	}
	if tr.modern && !declared {
		tr.fail(mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, msg.Method+" needs the "+extTasks+" extension: declare it in the request's client capabilities")
		return true
	}
	if name := r.Header.Get(mcp.HeaderName); tr.modern && name != "" && name != tr.params.TaskID {
		tr.fail(mcp.HEADER_MISMATCH, fmt.Sprintf("%s header %q does not match params.taskId %q", mcp.HeaderName, name, tr.params.TaskID))
		return true
	}
	switch msg.Method {
	case string(mcp.MethodTasksGet):
		s.getTask(tr)
	case string(mcp.MethodTasksResult):
		s.taskResult(tr)
	case string(mcp.MethodTasksCancel):
		s.cancelTask(tr)
	case string(mcp.MethodTasksList):
		s.listTasks(tr)
	case methodTasksUpdate:
		// gantry's tasks never wait for input, so no response is
		// outstanding; the extension says to ignore such responses.
		if _, ok := s.taskJob(tr); ok {
			tr.answer(struct{}{})
		}
	}
	return true
}

// methodTasksUpdate is the tasks extension's method for input responses.
const methodTasksUpdate = "tasks/update"

// declaresTasks reports whether a modern request declares the tasks
// extension in its per-request client capabilities.
func declaresTasks(meta *mcp.Meta) bool {
	caps := meta.ClientCapabilities()
	if caps == nil {
		return false
	}
	_, ok := caps.Extensions[extTasks]
	return ok
}

// createTask queues the call's job and answers with its task: at once when
// now is set, else (a modern client that did not ask for a task) after up
// to taskInlineWait, with the tool result if the job finished by then.
func (s *Server) createTask(tr *taskRequest, now bool) {
	var req mcp.CallToolRequest
	if err := json.Unmarshal(tr.body, &req); err != nil {
		tr.fail(mcp.INVALID_PARAMS, "tools/call params: "+err.Error())
		return
	}
	// The same checks as a plain call, in the same words.
	if schema := s.tools.schemas[taskTool]; schema != nil {
		if msg := schema.check(req); msg != "" {
			tr.badArguments(msg)
			return
		}
	}
	var args codeArgs
	if err := bindArgs(req, &args); err != nil {
		tr.badArguments(toolErrorText(err))
		return
	}
	ctx := tr.r.Context()
	job, _, err := s.svc.SubmitJob(ctx, tr.p, args.request())
	if err != nil {
		if e, internal := service.ToError(err); internal || e.Status >= 500 {
			tr.internal(err)
		} else {
			tr.badArguments(e.Message)
		}
		return
	}
	if !now {
		if job, err = s.svc.WaitJob(ctx, tr.p, job, service.Watch{Until: time.Now().Add(s.cfg.TaskInlineWait)}); err != nil {
			tr.internal(err)
			return
		}
		if job.Status.Terminal() {
			res := s.jobToolResult(ctx, tr.p, job)
			res.ResultType = mcp.ResultTypeComplete
			tr.answer(res)
			return
		}
	}
	if tr.modern {
		t := s.extTask(job)
		t.ResultType = "task"
		tr.answer(t)
		return
	}
	tr.answer(struct {
		Task mcp.Task `json:"task"`
	}{s.task(job)})
}

func (s *Server) getTask(tr *taskRequest) {
	job, ok := s.taskJob(tr)
	if !ok {
		return
	}
	if !tr.modern {
		tr.answer(s.task(job))
		return
	}
	t := s.extTask(job)
	if t.Status == mcp.TaskStatusCompleted {
		t.Result = s.jobToolResult(tr.r.Context(), tr.p, job)
	}
	tr.answer(t)
}

// taskResult waits until the task's job has finished (or the client goes
// away) and answers the tool's result.
func (s *Server) taskResult(tr *taskRequest) {
	job, ok := s.taskJob(tr)
	if !ok {
		return
	}
	ctx := tr.r.Context()
	job, err := s.svc.WaitJob(ctx, tr.p, job, service.Watch{})
	if err != nil {
		tr.internal(err)
		return
	}
	if !job.Status.Terminal() {
		return // the client went away
	}
	res := s.jobToolResult(ctx, tr.p, job)
	res.Meta = mcp.NewMetaFromMap(map[string]any{mcp.RelatedTaskMetaKey: mcp.RelatedTaskMeta(job.ID)})
	tr.answer(res)
}

// cancelTask cancels the task's job. A 2025-11-25 client is answered with
// the task as it then is (cancelJob waits a little for a running job to
// stop) and gets an error for a task that had already finished, as that
// protocol says; a client of the extension gets an acknowledgement.
func (s *Server) cancelTask(tr *taskRequest) {
	job, ok := s.taskJob(tr)
	if !ok {
		return
	}
	if !tr.modern && job.Status.Terminal() {
		tr.fail(mcp.INVALID_PARAMS, fmt.Sprintf("cannot cancel task %s: it already ended (%s)", job.ID, job.Status))
		return
	}
	job, err := s.svc.CancelJob(tr.r.Context(), tr.p, job.ID)
	if err != nil {
		tr.internal(err)
		return
	}
	if tr.modern {
		tr.answer(struct{}{})
		return
	}
	tr.answer(s.task(job))
}

// listTasks lists the tenant's jobs as tasks, newest first.
func (s *Server) listTasks(tr *taskRequest) {
	page, err := s.svc.ListJobs(tr.r.Context(), tr.p, service.JobQuery{Limit: 50, Cursor: tr.params.Cursor})
	if err != nil {
		if e, _ := service.ToError(err); e.Field == "cursor" {
			tr.fail(mcp.INVALID_PARAMS, "cursor is not one tasks/list returned")
			return
		}
		tr.internal(err)
		return
	}
	list := page.Jobs
	out := struct {
		Tasks      []mcp.Task `json:"tasks"`
		NextCursor string     `json:"nextCursor,omitempty"`
	}{Tasks: make([]mcp.Task, 0, len(list))}
	for _, j := range list {
		out.Tasks = append(out.Tasks, s.task(j))
	}
	out.NextCursor = page.NextCursor
	tr.answer(out)
}

// taskJob loads the job a task request names; when there is none it has
// answered the request and reports false.
func (s *Server) taskJob(tr *taskRequest) (jobs.Job, bool) {
	id := tr.params.TaskID
	if id == "" {
		tr.fail(mcp.INVALID_PARAMS, "params.taskId is required")
		return jobs.Job{}, false
	}
	job, err := s.svc.Job(tr.r.Context(), tr.p, id)
	var apiErr *service.Error
	switch {
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound:
		tr.fail(mcp.INVALID_PARAMS, fmt.Sprintf("failed to retrieve task: task %q not found", id))
		return jobs.Job{}, false
	case err != nil:
		tr.internal(err)
		return jobs.Job{}, false
	}
	return job, true
}

// taskStatus maps a job's status to its task's. A job that ran and ended
// in any way but a cancel completed the tool call: its result says how it
// went, as a plain call's does.
func taskStatus(j jobs.Job) (mcp.TaskStatus, string) {
	switch j.Status {
	case jobs.StatusQueued:
		return mcp.TaskStatusWorking, "queued: waiting for a runner"
	case jobs.StatusRunning:
		return mcp.TaskStatusWorking, "running"
	case jobs.StatusCancelled:
		return mcp.TaskStatusCancelled, "the job was cancelled"
	}
	return mcp.TaskStatusCompleted, "the job ended: " + string(j.Status)
}

// task is a job as a 2025-11-25 task.
func (s *Server) task(j jobs.Job) mcp.Task {
	status, msg := taskStatus(j)
	poll := taskPollInterval.Milliseconds()
	return mcp.Task{
		TaskId: j.ID, Status: status, StatusMessage: msg,
		CreatedAt: j.CreatedAt.UTC().Format(time.RFC3339Nano), LastUpdatedAt: lastUpdated(j).Format(time.RFC3339Nano),
		TTL: s.taskTTL(), PollInterval: &poll,
	}
}

// extTaskResult is a task as the tasks extension shows it: the task's
// fields, and once it completed, the tool's result.
type extTaskResult struct {
	ResultType     string              `json:"resultType"`
	TaskID         string              `json:"taskId"`
	Status         mcp.TaskStatus      `json:"status"`
	StatusMessage  string              `json:"statusMessage,omitempty"`
	CreatedAt      string              `json:"createdAt"`
	LastUpdatedAt  string              `json:"lastUpdatedAt"`
	TTLMs          *int64              `json:"ttlMs"`
	PollIntervalMs int64               `json:"pollIntervalMs"`
	Result         *mcp.CallToolResult `json:"result,omitempty"`
}

func (s *Server) extTask(j jobs.Job) extTaskResult {
	t := s.task(j)
	return extTaskResult{ResultType: string(mcp.ResultTypeComplete), TaskID: t.TaskId, Status: t.Status, StatusMessage: t.StatusMessage,
		CreatedAt: t.CreatedAt, LastUpdatedAt: t.LastUpdatedAt, TTLMs: t.TTL, PollIntervalMs: *t.PollInterval}
}

// taskTTL is how long a task is kept: as long as its job's history
// (GANTRY_HISTORY_TTL after it ends; null when history is kept forever).
func (s *Server) taskTTL() *int64 {
	ttl := s.svc.HistoryTTL()
	if ttl <= 0 {
		return nil
	}
	ms := ttl.Milliseconds()
	return &ms
}

func lastUpdated(j jobs.Job) time.Time {
	t := j.CreatedAt
	for _, u := range []*time.Time{j.StartedAt, j.FinishedAt} {
		if u != nil && u.After(t) {
			t = *u
		}
	}
	return t.UTC()
}

// answer writes a JSON-RPC result. Results of modern requests name the
// server, as every 2026-07-28 result should.
func (tr *taskRequest) answer(result any) {
	raw, err := json.Marshal(result)
	if err != nil {
		tr.internal(err)
		return
	}
	if tr.modern {
		var m map[string]any
		if json.Unmarshal(raw, &m) == nil {
			if m["resultType"] == nil {
				m["resultType"] = string(mcp.ResultTypeComplete)
			}
			meta, _ := m["_meta"].(map[string]any)
			if meta == nil {
				meta = map[string]any{}
			}
			meta[mcp.MetaKeyServerInfo] = mcp.Implementation{Name: "gantry", Version: tr.s.cfg.Version}
			m["_meta"] = meta
			raw, _ = json.Marshal(m)
		}
	}
	tr.write(http.StatusOK, map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": tr.id, "result": json.RawMessage(raw)})
}

// fail writes a JSON-RPC error; modern requests get the HTTP status the
// 2026-07-28 transport gives it.
func (tr *taskRequest) fail(code int, message string) {
	status := http.StatusOK
	if tr.modern {
		switch code {
		case mcp.HEADER_MISMATCH, mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, mcp.INVALID_PARAMS, mcp.INVALID_REQUEST:
			status = http.StatusBadRequest
		}
	}
	tr.write(status, map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": tr.id,
		"error": map[string]any{"code": code, "message": message}})
}

// badArguments answers a call whose arguments are wrong: a 2025-11-25
// client that asked for a task gets an invalid-params error (there is no
// task to hold a result), a client of the extension the tool error a plain
// call gets.
func (tr *taskRequest) badArguments(msg string) {
	if tr.modern {
		res := mcp.NewToolResultError(msg)
		res.ResultType = mcp.ResultTypeComplete
		tr.answer(res)
		return
	}
	tr.fail(mcp.INVALID_PARAMS, msg)
}

// internal answers an error the client cannot fix; an unavailable database
// or queue says so, anything else is logged and not shown.
func (tr *taskRequest) internal(err error) {
	e, internal := service.ToError(err)
	if internal {
		tr.s.log.Error("MCP task request failed", "method", tr.method, "err", err)
	}
	tr.fail(mcp.INTERNAL_ERROR, e.Message)
}

func (tr *taskRequest) write(status int, v any) { httpapi.WriteJSON(tr.w, status, v) }

// toolErrorText is the plain words of an argument error, as toolError
// gives them.
func toolErrorText(err error) string {
	e, _ := service.ToError(err)
	return e.Message
}
