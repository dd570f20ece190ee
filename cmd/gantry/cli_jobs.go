package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gantryhq/gantry/jobs"
)

const jobsUsage = `Usage:
  gantry jobs ls [--status S[,S]] [--lang L[,L]] [--since T] [--until T] [--meta K=V]...
                 [--session ID] [--batch ID] [--spec] [--limit N] [--cursor C] [--json]
                 T is a time (2026-01-02, 2026-01-02T15:04:05Z) or an age (90m, 6h, 7d);
                 --meta filters are ANDed; --spec adds what each job ran (env names only)
  gantry jobs get ID [--json]    the job and what it ran
  gantry jobs logs ID [-f]       the job's output; -f follows it live until the job ends
  gantry jobs cancel ID... [--json]
`

// apiErr turns a failed call into what the command returns.
func apiErr(err error) error { return &exitError{code: 1, msg: err.Error()} }

// subcommand splits a command group's arguments into its subcommand and
// the rest, with the subcommand's flag set (every one takes --json). A
// nil command means there is nothing to run: err is the usage error, or
// nil when help was printed.
func subcommand(group, usage string, args []string) (string, []string, *command, error) {
	if len(args) == 0 {
		return "", nil, nil, &usageError{msg: "missing subcommand", usage: usage}
	}
	sub, args := args[0], args[1:]
	if isHelp(sub) {
		fmt.Print(usage)
		return "", nil, nil, nil
	}
	c := newCommand(group+" "+sub, usage)
	c.fs.BoolVar(&c.json, "json", false, "")
	return sub, args, c, nil
}

func cmdJobs(ctx context.Context, args []string) error {
	sub, args, c, err := subcommand("jobs", jobsUsage, args)
	if c == nil {
		return err // a usage error, or help printed
	}
	switch sub {
	case "ls", "list":
		status := c.fs.String("status", "", "")
		lang := c.fs.String("lang", "", "")
		since := c.fs.String("since", "", "")
		until := c.fs.String("until", "", "")
		var meta stringList
		c.fs.Var(&meta, "meta", "")
		spec := c.fs.Bool("spec", false, "")
		session := c.fs.String("session", "", "")
		batch := c.fs.String("batch", "", "")
		limit := c.fs.Int("limit", 20, "")
		cursor := c.fs.String("cursor", "", "")
		if _, err := c.parse(args, 0, 0); err != nil {
			return err
		}
		q := url.Values{"limit": {strconv.Itoa(*limit)}}
		for k, v := range map[string]string{"status": *status, "language": *lang, "session_id": *session, "batch_id": *batch, "cursor": *cursor} {
			if v != "" {
				q.Set(k, v)
			}
		}
		now := time.Now()
		for _, t := range []struct{ flag, param, value string }{{"since", "created_after", *since}, {"until", "created_before", *until}} {
			if t.value == "" {
				continue
			}
			at, err := parseWhen(t.value, now)
			if err != nil {
				return &usageError{msg: fmt.Sprintf("--%s: %v", t.flag, err), usage: jobsUsage}
			}
			q.Set(t.param, at.UTC().Format(time.RFC3339Nano))
		}
		for _, kv := range meta {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return &usageError{msg: fmt.Sprintf("--meta %q: want KEY=VALUE", kv), usage: jobsUsage}
			}
			q.Set("metadata."+k, v)
		}
		if *spec {
			q.Set("include", "spec")
		}
		var page struct {
			Jobs       []jobs.Job
			NextCursor *string `json:"next_cursor"`
		}
		if printed, err := c.fetch(ctx, request{method: "GET", path: "/v1/jobs", query: q}, &page); printed || err != nil {
			return err
		}
		tw := newTable()
		header := "ID\tSTATUS\tLANGUAGE\tEXIT\tDURATION\tCREATED"
		if *spec {
			header += "\tRAN"
		}
		fmt.Fprintln(tw, header)
		for _, j := range page.Jobs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", j.ID, j.Status, j.Language, exitText(j), durationText(j), ago(j.CreatedAt))
			if j.Spec != nil {
				fmt.Fprintf(tw, "\t%s", oneLine(specText(j.Spec), 60))
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if page.NextCursor != nil {
			fmt.Fprintf(os.Stderr, "more: gantry jobs ls --cursor %s (with the same filters)\n", *page.NextCursor)
		}
		return nil

	case "get":
		pos, err := c.parse(args, 1, 1)
		if err != nil {
			return err
		}
		var j jobs.Job
		q := url.Values{"include": {"spec"}}
		if printed, err := c.fetch(ctx, request{method: "GET", path: "/v1/jobs/" + url.PathEscape(pos[0]), query: q}, &j); printed || err != nil {
			return err
		}
		printJob(j)
		return nil

	case "logs":
		follow := c.fs.Bool("f", false, "")
		pos, err := c.parse(args, 1, 1)
		if err != nil {
			return err
		}
		a, err := newAPI()
		if err != nil {
			return apiErr(err)
		}
		if *follow {
			if err := a.follow(ctx, pos[0], nil); err != nil && ctx.Err() == nil {
				return apiErr(err)
			}
			return nil
		}
		j, err := a.getJob(ctx, pos[0])
		if err != nil {
			return apiErr(err)
		}
		if !j.Status.Terminal() {
			fmt.Fprintf(os.Stderr, "gantry: job %s is %s; its output is kept when it ends (gantry jobs logs -f %s follows it live)\n", j.ID, j.Status, j.ID)
			return nil
		}
		fmt.Fprint(os.Stdout, j.Stdout)
		fmt.Fprint(os.Stderr, j.Stderr)
		return nil

	case "cancel":
		pos, err := c.parse(args, 1, -1)
		if err != nil {
			return err
		}
		a, err := newAPI()
		if err != nil {
			return apiErr(err)
		}
		for _, id := range pos {
			var j jobs.Job
			if err := a.json(ctx, request{method: "POST", path: "/v1/jobs/" + url.PathEscape(id) + "/cancel", idempotent: true}, nil, &j); err != nil {
				return apiErr(fmt.Errorf("%s: %w", id, err))
			}
			if c.json {
				if err := printJSON(j); err != nil {
					return err
				}
			} else {
				fmt.Printf("%s\t%s\n", j.ID, j.Status)
			}
		}
		return nil
	}
	return &usageError{msg: fmt.Sprintf("unknown subcommand %q", sub), usage: jobsUsage}
}

// parseWhen reads a time for --since and --until: RFC 3339, a date
// (midnight, local time), or an age before now (90m, 6h, 7d).
func parseWhen(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", v, time.Local); err == nil {
		return t, nil
	}
	age := v
	days := 0.0
	if n, ok := strings.CutSuffix(v, "d"); ok {
		f, err := strconv.ParseFloat(n, 64)
		if err != nil || f < 0 {
			return time.Time{}, fmt.Errorf("%q is not a time (2026-01-02, 2026-01-02T15:04:05Z) or an age (90m, 6h, 7d)", v)
		}
		days, age = f, "0s"
	}
	d, err := time.ParseDuration(age)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is not a time (2026-01-02, 2026-01-02T15:04:05Z) or an age (90m, 6h, 7d)", v)
	}
	return now.Add(-d - time.Duration(days*24*float64(time.Hour))), nil
}

// specText is what a job ran: its command or code.
func specText(v *jobs.JobSpec) string {
	if len(v.Command) > 0 {
		return strings.Join(v.Command, " ")
	}
	return v.Code
}

func exitText(j jobs.Job) string {
	if j.ExitCode == nil {
		return "-"
	}
	return strconv.Itoa(*j.ExitCode)
}

func durationText(j jobs.Job) string {
	if j.DurationMS == nil {
		return "-"
	}
	return (time.Duration(*j.DurationMS) * time.Millisecond).String()
}

// printJob shows a job for people (its output: gantry jobs logs).
func printJob(j jobs.Job) {
	tw := newTable()
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("id", j.ID)
	status := string(j.Status)
	if j.ExitCode != nil {
		status += fmt.Sprintf(" (exit code %d)", *j.ExitCode)
	}
	row("status", status)
	if j.Error != nil {
		row("error", string(j.Error.Code)+": "+j.Error.Message)
	}
	row("language", j.Language)
	row("created", j.CreatedAt.Local().Format(time.RFC3339))
	if j.DurationMS != nil {
		row("duration", durationText(j))
	}
	if j.SessionID != nil {
		row("session", *j.SessionID)
	}
	if j.BatchID != nil {
		row("batch", *j.BatchID)
	}
	row("attempt", strconv.Itoa(j.Attempt))
	row("output", fmt.Sprintf("%s stdout, %s stderr (gantry jobs logs %s)", size(int64(len(j.Stdout))), size(int64(len(j.Stderr))), j.ID))
	for i, a := range j.Artifacts {
		k := ""
		if i == 0 {
			k = "artifacts"
		}
		row(k, fmt.Sprintf("%s (%s)", a.Path, size(a.Size)))
	}
	for k, v := range j.Metadata {
		row("metadata."+k, v)
	}
	if sp := j.Spec; sp != nil {
		if len(sp.Command) > 0 {
			row("command", strings.Join(sp.Command, " "))
		}
		if sp.Code != "" {
			lines := strings.Split(strings.TrimRight(sp.Code, "\n"), "\n")
			for i, l := range lines {
				k := ""
				if i == 0 {
					k = "code"
				}
				if i == 5 {
					row(k, fmt.Sprintf("… %d more lines (gantry jobs get %s --json)", len(lines)-5, j.ID))
					break
				}
				row(k, l)
			}
		}
		for i, f := range sp.Files {
			k := ""
			if i == 0 {
				k = "files"
			}
			row(k, fmt.Sprintf("%s (%s)", f.Path, size(f.Size)))
		}
		if len(sp.EnvNames) > 0 {
			row("env", strings.Join(sp.EnvNames, ", ")+" (values are never shown)")
		}
		row("limits", fmt.Sprintf("timeout %s, %d MB memory, %g CPUs", time.Duration(sp.TimeoutMS)*time.Millisecond, sp.Limits.MemoryMB, sp.Limits.CPUs))
	}
	if w := j.Webhook; w != nil {
		text := fmt.Sprintf("%s, %d attempt(s), to %s", w.Status, len(w.Attempts), w.URL)
		if n := len(w.Attempts); n > 0 && w.Attempts[n-1].Error != "" {
			text += "; last: " + w.Attempts[n-1].Error
		}
		row("webhook", text)
	} else if j.WebhookURL != nil {
		row("webhook", *j.WebhookURL+" (when it finishes)")
	}
	_ = tw.Flush()
}

const sessionsUsage = `Usage:
  gantry sessions ls [--limit N] [--cursor C] [--json]
  gantry sessions create [--lang LANG] [--ttl DUR] [--env NAME] [--json]   prints the new session's id
  gantry sessions rm ID...
`

func cmdSessions(ctx context.Context, args []string) error {
	sub, args, c, err := subcommand("sessions", sessionsUsage, args)
	if c == nil {
		return err // a usage error, or help printed
	}
	switch sub {
	case "ls", "list":
		limit := c.fs.Int("limit", 20, "")
		cursor := c.fs.String("cursor", "", "")
		if _, err := c.parse(args, 0, 0); err != nil {
			return err
		}
		q := url.Values{"limit": {strconv.Itoa(*limit)}}
		if *cursor != "" {
			q.Set("cursor", *cursor)
		}
		var page struct {
			Sessions   []jobs.Session
			NextCursor *string `json:"next_cursor"`
		}
		if printed, err := c.fetch(ctx, request{method: "GET", path: "/v1/sessions", query: q}, &page); printed || err != nil {
			return err
		}
		tw := newTable()
		fmt.Fprintln(tw, "ID\tSTATUS\tLANGUAGE\tFILES\tLAST JOB\tEXPIRES")
		for _, s := range page.Sessions {
			last := "-"
			if s.LastJobID != nil {
				last = *s.LastJobID
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Status, s.Language, size(s.Bytes), last, s.ExpiresAt.Local().Format("2006-01-02 15:04"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if page.NextCursor != nil {
			fmt.Fprintf(os.Stderr, "more: gantry sessions ls --cursor %s\n", *page.NextCursor)
		}
		return nil

	case "create", "new":
		lang := c.fs.String("lang", "python", "")
		ttl := c.fs.Duration("ttl", 0, "")
		environment := c.fs.String("env", "", "")
		if _, err := c.parse(args, 0, 0); err != nil {
			return err
		}
		a, err := newAPI()
		if err != nil {
			return apiErr(err)
		}
		var s jobs.Session
		req := jobs.SessionRequest{Language: *lang, TTLSeconds: int(ttl.Seconds()), Environment: *environment}
		if err := a.json(ctx, request{method: "POST", path: "/v1/sessions"}, req, &s); err != nil {
			return apiErr(err)
		}
		if c.json {
			return printJSON(s)
		}
		fmt.Println(s.ID)
		return nil

	case "rm", "delete", "close":
		pos, err := c.parse(args, 1, -1)
		if err != nil {
			return err
		}
		a, err := newAPI()
		if err != nil {
			return apiErr(err)
		}
		for _, id := range pos {
			if err := a.json(ctx, request{method: "DELETE", path: "/v1/sessions/" + url.PathEscape(id), idempotent: true}, nil, nil); err != nil {
				return apiErr(fmt.Errorf("%s: %w", id, err))
			}
			fmt.Println("closed", id)
		}
		return nil
	}
	return &usageError{msg: fmt.Sprintf("unknown subcommand %q", sub), usage: sessionsUsage}
}

// oneLine shortens text to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
