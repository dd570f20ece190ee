package mcpapi

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/gantryhq/gantry/ingress/service"
)

func (s *Server) addPrompt(ms *server.MCPServer) {
	ms.AddPrompt(mcp.NewPrompt("agent_system_prompt",
		mcp.WithPromptDescription("How to use gantry well: a system prompt for an agent, generated from what this server offers."),
	), func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		sel := toolsetsFrom(ctx)
		text := s.agentPrompt(sel)
		if p, ok := service.PrincipalFrom(ctx); ok {
			if sel.has(toolsetSkills) {
				recs, err := s.svc.Skills(ctx, p)
				if err != nil {
					return nil, err
				}
				text += skillsPromptSection(recs)
			}
			if s.svc.CodeMode().Check() == nil && sel.has(toolsetCode) {
				servers, err := s.svc.CodeMode().MCPServers(ctx, p)
				if err != nil {
					return nil, err
				}
				text += codeModePrompt(servers)
			}
		}
		return mcp.NewGetPromptResult("How to run code with gantry",
			[]mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(text))}), nil
	})
}

// agentPrompt tells an agent how to use gantry, from the server's real
// languages, limits and tools: those of the selected toolsets.
func (s *Server) agentPrompt(sel toolsetSelection) string {
	p := s.svc.Policy()
	var b strings.Builder
	b.WriteString("You can run code in gantry, a sandbox service. Each run gets a fresh, isolated Linux container with no network access.\n\n")
	b.WriteString("Languages:\n")
	compiled := false
	for _, l := range p.Offered() {
		fmt.Fprintf(&b, "- %s: %s\n", l.Name, l.Description)
		compiled = compiled || l.Compiled()
	}
	fmt.Fprintf(&b, `
How to work:
- Use execute_code to run a program and get its output. Write code that does the work in the sandbox — load, filter, join, aggregate, compute — and print only the small result you need. Output beyond %d bytes per stream is cut, and everything you print costs context.
- Pass input data with the files argument (they land in the working directory, /workspace); use encoding "base64" for binary files.
- To hand back files (plots, CSVs, reports), save them under out/ (for example out/plot.png with matplotlib). They come back as download links in the result; get_artifact_url makes a fresh link later.
- The default time limit is %d s (timeout_ms up to %d s); memory is %d MB by default. A job ends as succeeded, failed (non-zero exit, or error.code oom_killed), timed_out, cancelled, or error (gantry could not run it).
- If a run fails, read stderr, fix the code and run it again.
`, p.DefaultLimits.OutputBytes, p.DefaultTimeoutMS/1000, p.MaxTimeoutMS/1000, p.DefaultLimits.MemoryMB)
	if compiled {
		b.WriteString("- Code in a compiled language is compiled first (compile_timeout_ms, default 30 s): a failed compile ends the job with error.code compile_error and the compiler's messages in compile_output.\n")
	}
	if sel.has(toolsetJobs) {
		b.WriteString("- For long work use submit_job, then get_job with wait_ms; cancel_job stops a job. list_jobs shows your history.\n")
	}
	if sel.has(toolsetSessions) {
		b.WriteString("- Each execute_code call without a session starts from an empty workspace. For multi-step work (write a file, run it, read the result, fix, rerun) " +
			"create a session with create_session and pass its session_id: files in /workspace persist from call to call, calls run one at a time in order, " +
			"and read_file, write_file, list_files and read_docstring work on its files. Close it with close_session when done; an idle session expires. " +
			"A stateful one can be paused (pause_session; its next call resumes it), snapshotted (snapshot_session; create_session with snapshot starts from it) and forked (fork_session).\n")
	}
	return b.String()
}

// skillsPromptBudget caps the skills section of agent_system_prompt, in
// characters (about a quarter as many tokens): however many skills a tenant
// has, the prompt stays small, and the full text is fetched on demand.
const skillsPromptBudget = 4000

// skillsPromptSection lists skills one line each within the budget.
func skillsPromptSection(recs []service.SkillRecord) string {
	if len(recs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nSkills (reusable know-how; each is mounted read-only at /skills/<name>/ in every run, and Python imports its code with hyphens as underscores: data-analysis is `from skills.data_analysis import helpers`). " +
		"Read one with get_skill before using it; find more with search_skills:\n")
	for i, r := range recs {
		line := "- " + r.Summary()
		if len(line) > 160 {
			line = line[:157] + "..."
		}
		line += "\n"
		if b.Len()+len(line) > skillsPromptBudget-80 {
			fmt.Fprintf(&b, "- ...and %d more: search_skills finds them.\n", len(recs)-i)
			break
		}
		b.WriteString(line)
	}
	return b.String()
}
