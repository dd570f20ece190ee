package mcpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
)

const jobURIPrefix = "gantry://jobs/"

func (s *Server) addResources(ms *server.MCPServer) {
	ms.AddResourceTemplate(mcp.NewResourceTemplate(jobURIPrefix+"{id}", "job",
		mcp.WithTemplateDescription("A job of yours: status, output and artifact links, as JSON."),
		mcp.WithTemplateMIMEType("application/json"),
	), s.readJobResource)
}

func (s *Server) readJobResource(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	p, ok := service.PrincipalFrom(ctx)
	if !ok {
		return nil, errNoPrincipal
	}
	id, ok := strings.CutPrefix(req.Params.URI, jobURIPrefix)
	if !ok {
		return nil, fmt.Errorf("unknown resource %q", req.Params.URI)
	}
	job, err := s.svc.Job(ctx, p, id)
	if err != nil {
		e, _ := service.ToError(err)
		return nil, fmt.Errorf("%s", e.Message)
	}
	res := s.jobToolResult(ctx, p, job)
	data, err := json.MarshalIndent(res.StructuredContent, "", "  ")
	if err != nil {
		return nil, err
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "application/json", Text: string(data)}}, nil
}

// listJobResources adds the tenant's recent jobs to resources/list.
func (s *Server) listJobResources(ctx context.Context, _ any, _ *mcp.ListResourcesRequest, result *mcp.ListResourcesResult) {
	p, ok := service.PrincipalFrom(ctx)
	if !ok || result == nil {
		return
	}
	page, err := s.svc.ListJobs(ctx, p, service.JobQuery{Limit: 20})
	if err != nil {
		s.log.Warn("list job resources", "err", err)
		return
	}
	list := page.Jobs
	if recs, err := s.svc.Skills(ctx, p); err == nil {
		for _, r := range recs {
			result.Resources = append(result.Resources, mcp.NewResource(skillURIPrefix+r.Name, "skill "+r.Name,
				mcp.WithResourceDescription(r.Description), mcp.WithMIMEType("text/markdown")))
		}
	}
	for _, j := range list {
		result.Resources = append(result.Resources, mcp.NewResource(jobURIPrefix+j.ID,
			fmt.Sprintf("job %s (%s, %s)", j.ID, j.Language, j.Status),
			mcp.WithResourceDescription(describeJob(j)),
			mcp.WithMIMEType("application/json")))
	}
}

func describeJob(j jobs.Job) string {
	d := fmt.Sprintf("%s job created %s, %s", j.Language, j.CreatedAt.Format("2006-01-02 15:04:05Z"), j.Status)
	if len(j.Artifacts) > 0 {
		d += fmt.Sprintf(", %d artifacts", len(j.Artifacts))
	}
	return d
}
