package mcpapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/gantryhq/gantry/ingress/httpapi"
	"github.com/gantryhq/gantry/ingress/openapi"
	"github.com/gantryhq/gantry/ingress/service"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/skills"
)

const skillURIPrefix = "skill://"

// The MCP skill tools' arguments.
type (
	searchSkillsArgs struct {
		Query string `json:"query"`
		Limit int    `json:"limit,omitempty"`
	}
	getSkillArgs struct {
		Name    string `json:"name"`
		Version int    `json:"version,omitempty"`
	}
	saveSkillArgs struct {
		Name          string            `json:"name"`
		Description   string            `json:"description"`
		Body          string            `json:"body"`
		License       string            `json:"license,omitempty"`
		Compatibility string            `json:"compatibility,omitempty"`
		Metadata      map[string]string `json:"metadata,omitempty"`
		AllowedTools  string            `json:"allowed_tools,omitempty"`
		Tags          []string          `json:"tags,omitempty"`
		Language      string            `json:"language,omitempty"`
		Files         []skills.File     `json:"files,omitempty"`
	}
)

func (s *Server) addSkillTools(ms *server.MCPServer, tools *toolCatalog) {
	tools.add(ms, toolsetSkills, mcp.NewTool("search_skills",
		mcp.WithDescription("Search the skills (tested recipes and helper code: charts, data clean-up, maths, files...) by what you want to do; "+
			"one line per match. Read one with get_skill."),
		mcp.WithTitleAnnotation("Search skills"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[searchSkillsArgs](toolNote{props: map[string]js{
			"query": {"minLength": 1, "maxLength": 500, "description": "What you want to do, e.g. 'plot a histogram'."},
			"limit": {"minimum": 1, "maximum": 50, "description": "Default 5."},
		}}),
		outputOf[httpapi.SkillList](toolNote{}),
	), s.toolSearchSkills)

	tools.add(ms, toolsetSkills, mcp.NewTool("get_skill",
		mcp.WithDescription("Read a skill in full: its SKILL.md (when to use it, steps, examples) and its files. "+
			"They are at /skills/<name>/ in every run; Python imports a skill's code with hyphens as underscores (`from skills.data_analysis import helpers`)."),
		mcp.WithTitleAnnotation("Read skill"),
		mcp.WithReadOnlyHintAnnotation(true),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[getSkillArgs](toolNote{props: map[string]js{"version": {"minimum": 1, "description": "A past version (default: the current one)."}}}),
		outputOf[service.SkillView](skillNote),
	), s.toolGetSkill)

	tools.add(ms, toolsetSkills, mcp.NewTool("save_skill",
		mcp.WithDescription("Save a skill (Agent Skills format) for later runs: a new skill, or a new version of one of yours (old versions stay readable). "+
			"Write the body as markdown: when to use it, the steps, and an example that runs. Files are mounted at /skills/<name>/ in every later run. "+
			"Built-in skills cannot be overwritten; save an improved copy under a new name."),
		mcp.WithTitleAnnotation("Save skill"),
		mcp.WithReadOnlyHintAnnotation(false),
		mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(false),
		mcp.WithOpenWorldHintAnnotation(false),
		inputOf[saveSkillArgs](toolNote{props: map[string]js{
			"name":           {"minLength": 1, "maxLength": skills.MaxNameLen, "pattern": skills.NamePattern, "description": "Lowercase letters, digits and single hyphens, e.g. tidy-logs."},
			"description":    {"minLength": 1, "maxLength": skills.MaxDescription, "description": "What it does and when to use it."},
			"body":           {"minLength": 1, "maxLength": skills.MaxSkillMD},
			"license":        {"maxLength": skills.MaxLicense},
			"compatibility":  {"maxLength": skills.MaxCompatibility, "description": "What it needs to run."},
			"allowed_tools":  {"description": "Tool names separated by spaces."},
			"tags":           {"maxItems": skills.MaxTags},
			"language":       {"enum": openapi.Enum(skills.Languages)},
			"files":          {"maxItems": skills.MaxFiles},
			"files.path":     {"description": "e.g. helpers.py, scripts/run.py, assets/logo.png"},
			"files.encoding": {"enum": openapi.Enum(jobs.Encodings)},
		}}),
		outputOf[service.SkillView](skillNote),
	), s.toolSaveSkill)
}

// skillNote: a skill's files come back as text, or as base64 when binary.
var skillNote = toolNote{props: map[string]js{"files.encoding": {"enum": []any{jobs.EncodingBase64}}}}

func (s *Server) toolSearchSkills(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args searchSkillsArgs
	p, res, err := begin(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	if args.Limit == 0 {
		args.Limit = 5
	}
	if err := service.CheckText("query", args.Query); err != nil {
		return toolError(err), nil
	}
	hits, err := s.svc.SearchSkills(ctx, p, args.Query, min(args.Limit, 50))
	if err != nil {
		return toolError(err), nil
	}
	var b strings.Builder
	for _, h := range hits {
		fmt.Fprintf(&b, "- %s (v%d): %s\n", h.Name, h.Version, skills.OneLine(h.Description))
	}
	if len(hits) == 0 {
		b.WriteString("no skill matches; try other words\n")
	}
	return mcp.NewToolResultStructured(httpapi.SkillList{Skills: hits}, b.String()), nil
}

func skillResult(v service.SkillView) *mcp.CallToolResult {
	var b strings.Builder
	b.WriteString(v.SkillMD)
	if len(v.Files) > 0 {
		fmt.Fprintf(&b, "\n\nFiles at /skills/%s/:\n", v.Name)
		for _, f := range v.Files {
			if f.Binary() {
				fmt.Fprintf(&b, "\n--- %s (binary, %d bytes; base64 in the structured result) ---\n", f.Path, len(f.Content))
				continue
			}
			fmt.Fprintf(&b, "\n--- %s ---\n%s", f.Path, f.Content)
		}
	}
	return mcp.NewToolResultStructured(v, b.String())
}

func (s *Server) toolGetSkill(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args getSkillArgs
	p, res, err := begin(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	rec, err := s.svc.Skill(ctx, p, args.Name, args.Version)
	if err != nil {
		return toolError(err), nil
	}
	return skillResult(service.ViewSkill(rec)), nil
}

func (s *Server) toolSaveSkill(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args saveSkillArgs
	p, res, err := begin(ctx, req, &args)
	if res != nil || err != nil {
		return res, err
	}
	rec, err := s.svc.SaveSkill(ctx, p, skills.Skill{Name: args.Name, Description: args.Description, Body: args.Body,
		License: args.License, Compatibility: args.Compatibility, Metadata: args.Metadata, AllowedTools: args.AllowedTools,
		Tags: args.Tags, Language: args.Language, Files: args.Files})
	if err != nil {
		return toolError(err), nil
	}
	res = skillResult(service.ViewSkill(rec))
	res.Content = []mcp.Content{mcp.NewTextContent(fmt.Sprintf("saved %s version %d; later runs see it at /skills/%s/", rec.Name, rec.Version, rec.Name))}
	return res, nil
}

func (s *Server) addSkillResources(ms *server.MCPServer) {
	ms.AddResourceTemplate(mcp.NewResourceTemplate(skillURIPrefix+"{name}", "skill",
		mcp.WithTemplateDescription("A skill's SKILL.md (markdown with front matter)."),
		mcp.WithTemplateMIMEType("text/markdown"),
	), func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		p, ok := service.PrincipalFrom(ctx)
		if !ok {
			return nil, errNoPrincipal
		}
		name, _ := strings.CutPrefix(req.Params.URI, skillURIPrefix)
		rec, err := s.svc.Skill(ctx, p, name, 0)
		if err != nil {
			e, _ := service.ToError(err)
			return nil, fmt.Errorf("%s", e.Message)
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/markdown", Text: rec.Markdown()}}, nil
	})
}
