package httpapi

import (
	_ "embed"
	"fmt"
	"net/http"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gantryhq/gantry/chat"
	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/ingress/openapi"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/skills"
	"github.com/gantryhq/gantry/snapshot"
	"github.com/gantryhq/gantry/webhook"
)

// OpenAPI writes the API's OpenAPI 3.1 document: the operations from the
// route table, the schemas reflected from the Go types the handlers read
// and write, the patterns and enums of the packages that own them
// (contract.go) and the prose of openapi.yaml. ingress/openapi.json is
// what it writes (go generate ./ingress); a test fails when the committed
// file is not.
func OpenAPI() ([]byte, error) {
	p, err := loadProse()
	if err != nil {
		return nil, err
	}
	table := (&Server{}).routeTable()
	ops := make([]openapi.Operation, len(table))
	ids := map[string]bool{}
	for i, rt := range table {
		ops[i] = rt.operation()
		ops[i].Description = p.Operations[rt.ID].Description
		ids[rt.ID] = true
	}
	for id := range p.Operations {
		if !ids[id] {
			return nil, fmt.Errorf("openapi.yaml: a description of operation %s, which the route table does not have", id)
		}
	}
	return openapi.Write(ops, openapi.Document{
		Info: p.Info, Tags: p.Tags, Webhooks: p.Webhooks,
		Components: componentTypes, Notes: p.Schemas,
		Parameters: p.Parameters, Headers: p.Headers, Responses: p.Responses, SecuritySchemes: p.SecuritySchemes,
		SharedErrors: sharedErrors, AuthErrors: authErrors,
	})
}

// openapiYAML is the document's prose.
//
//go:embed openapi.yaml
var openapiYAML []byte

// prose is openapi.yaml.
type prose struct {
	Info       js    `yaml:"info"`
	Tags       []any `yaml:"tags"`
	Operations map[string]struct {
		Description string `yaml:"description"`
	} `yaml:"operations"`
	Schemas         map[string]openapi.Note `yaml:"schemas"`
	Parameters      js                      `yaml:"parameters"`
	Headers         js                      `yaml:"headers"`
	Responses       js                      `yaml:"responses"`
	SecuritySchemes js                      `yaml:"securitySchemes"`
	Webhooks        js                      `yaml:"webhooks"`
}

// loadProse reads openapi.yaml and lays the constraints over it.
func loadProse() (prose, error) {
	var p prose
	dec := yaml.NewDecoder(strings.NewReader(string(openapiYAML)))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("openapi.yaml: %w", err)
	}
	for _, c := range constraints() {
		if err := c.apply(&p); err != nil {
			return p, err
		}
	}
	return p, nil
}

// componentTypes are the document's named schemas.
var componentTypes = []openapi.Component{
	{Name: "JobStatus", Type: typ[jobs.Status]()},
	{Name: "Limits", Type: typ[jobs.Limits]()},
	{Name: "InputFile", Type: typ[jobs.File]()},
	{Name: "JobRequest", Type: typ[jobs.Request]()},
	{Name: "ErrorInfo", Type: typ[jobs.ErrorInfo]()},
	{Name: "Compile", Type: typ[jobs.Compile]()},
	{Name: "Test", Type: typ[jobs.Test]()},
	{Name: "TestResult", Type: typ[jobs.TestResult]()},
	{Name: "Artifact", Type: typ[jobs.Artifact]()},
	{Name: "Job", Type: typ[jobs.Job]()},
	{Name: "Value", Type: typ[jobs.Value]()},
	{Name: "Exception", Type: typ[jobs.Exception]()},
	{Name: "LiveState", Type: typ[jobs.LiveState]()},
	{Name: "JobSpec", Type: typ[jobs.JobSpec]()},
	{Name: "JobSpecFile", Type: typ[jobs.FileInfo]()},
	{Name: "JobList", Type: typ[jobList]()},
	{Name: "ArtifactManifest", Type: typ[artifactManifest]()},
	{Name: "PresignedURL", Type: typ[service.PresignedURL]()},
	{Name: "Language", Type: typ[jobs.Language]()},
	{Name: "LanguageList", Type: typ[languageList]()},
	{Name: "Usage", Type: typ[jobs.Usage]()},
	{Name: "UsageBucket", Type: typ[jobs.UsageBucket]()},
	{Name: "UsageFigures", Type: typ[jobs.UsageFigures]()},
	{Name: "Environment", Type: typ[jobs.Environment]()},
	{Name: "EgressConnection", Type: typ[jobs.EgressConnection]()},
	{Name: "EnvironmentList", Type: typ[environmentList]()},
	{Name: "Health", Type: typ[health]()},
	{Name: "Readiness", Type: typ[readiness]()},
	{Name: "Error", Type: typ[errorBody]()},
	{Name: "ErrorDetail", Type: typ[service.Error]()},
	{Name: "LogChunk", Type: typ[logChunk]()},
	{Name: "LogStatusEvent", Type: typ[logStatus]()},
	{Name: "Session", Type: typ[jobs.Session]()},
	{Name: "SessionRequest", Type: typ[jobs.SessionRequest]()},
	{Name: "SessionList", Type: typ[sessionList]()},
	{Name: "SessionState", Type: typ[jobs.SessionState]()},
	{Name: "Snapshot", Type: typ[jobs.Snapshot]()},
	{Name: "SnapshotRequest", Type: typ[jobs.SnapshotRequest]()},
	{Name: "SnapshotList", Type: typ[snapshotList]()},
	{Name: "ForkRequest", Type: typ[jobs.ForkRequest]()},
	{Name: "Fork", Type: typ[jobs.Fork]()},
	{Name: "Network", Type: typ[jobs.Network]()},
	{Name: "NetworkRule", Type: typ[jobs.NetworkRule]()},
	{Name: "Secret", Type: typ[jobs.Secret]()},
	{Name: "SecretRequest", Type: typ[jobs.SecretRequest]()},
	{Name: "SecretList", Type: typ[secretList]()},
	{Name: "FileInfo", Type: typ[snapshot.Entry]()},
	{Name: "FileList", Type: typ[FileList]()},
	{Name: "SkillFile", Type: typ[skills.File]()},
	{Name: "SkillSummary", Type: typ[service.SkillSummary]()},
	{Name: "SkillList", Type: typ[SkillList]()},
	{Name: "Skill", Type: typ[service.SkillView]()},
	{Name: "SkillPut", Type: typ[skillPut]()},
	{Name: "SkillVersions", Type: typ[skillVersions]()},
	{Name: "McpServerRegistration", Type: typ[codemode.Registration]()},
	{Name: "McpServerUpdate", Type: typ[codemode.Update]()},
	{Name: "McpServer", Type: typ[codemode.Server]()},
	{Name: "McpServerList", Type: typ[MCPServerList]()},
	{Name: "McpServerDetail", Type: typ[service.MCPServerDetail]()},
	{Name: "ToolInfo", Type: typ[codemode.ToolInfo]()},
	{Name: "ToolList", Type: typ[toolList]()},
	{Name: "ToolCall", Type: typ[jobs.ToolCall]()},
	{Name: "Settings", Type: typ[settings]()},
	{Name: "WebhookAttempt", Type: typ[jobs.WebhookAttempt]()},
	{Name: "WebhookDelivery", Type: typ[jobs.WebhookDelivery]()},
	{Name: "WebhookEvent", Type: typ[webhook.Event]()},
	{Name: "WebhookSecret", Type: typ[webhook.Secrets]()},
	{Name: "BatchRequest", Type: typ[batchRequest]()},
	{Name: "BatchItem", Type: typ[batchItem]()},
	{Name: "BatchResponse", Type: typ[batchResponse]()},
	{Name: "ChatMessage", Type: typ[chat.Message]()},
	{Name: "ChatToolCall", Type: typ[chat.ToolCall]()},
	{Name: "ChatCompletionRequest", Type: typ[chat.Request]()},
	{Name: "AgentEvent", Type: typ[chat.Event]()},
	{Name: "AgentTrace", Type: typ[chat.Trace]()},
	{Name: "ChatChoice", Type: typ[chat.Choice]()},
	{Name: "ChatCompletion", Type: typ[chat.Completion]()},
	{Name: "ChatUsage", Type: typ[chat.Usage]()},
	{Name: "ChatDelta", Type: typ[chat.Delta]()},
	{Name: "ChatChunkChoice", Type: typ[chat.ChunkChoice]()},
	{Name: "ChatCompletionChunk", Type: typ[chat.Chunk]()},
}

// sharedErrors are the components.responses a route names by status in
// its Errors.
var sharedErrors = map[int]string{
	http.StatusBadRequest:            "BadRequest",
	http.StatusNotFound:              "NotFound",
	http.StatusConflict:              "Conflict",
	http.StatusRequestEntityTooLarge: "PayloadTooLarge",
	http.StatusBadGateway:            "UpstreamError",
}

// authErrors are the answers every authenticated route may give: a bad
// key, the tenant's rate, a bug, the database away.
var authErrors = []openapi.StatusRef{{Status: "401", Name: "Unauthenticated"}, {Status: "429", Name: "RateLimited"},
	{Status: "500", Name: "Internal"}, {Status: "503", Name: "Unavailable"}}

// serveDocument answers GET /openapi.json.
func (s *Server) serveDocument(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.cfg.Document)
}
