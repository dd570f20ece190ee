package console

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/localapi"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	// jobsIn is how many of a usage's jobs have status s.
	"jobsIn": func(f jobs.UsageFigures, s string) int { return f.Jobs[jobs.Status(s)] },
	"when": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			if v.IsZero() {
				return "–"
			}
			return v.UTC().Format("2006-01-02 15:04:05")
		case *time.Time:
			if v == nil || v.IsZero() {
				return "–"
			}
			return v.UTC().Format("2006-01-02 15:04:05")
		}
		return "–"
	},
	"iso":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"bytes": formatBytes,
	"ptr":   func(n int64) *int64 { return &n },
	// kib shows a size in KiB (a job's peak memory), "–" for none.
	"kib": func(p *int64) string {
		if p == nil {
			return "–"
		}
		return formatBytes(*p << 10)
	},
	// cpu shows CPU seconds (a usage report's) as a duration.
	"cpu": func(s float64) string { return fmtMS(s * 1000) },
	"ms": func(p *int64) string {
		if p == nil {
			return "–"
		}
		d := time.Duration(*p) * time.Millisecond
		if d < time.Second {
			return fmt.Sprintf("%d ms", *p)
		}
		return d.Round(10 * time.Millisecond).String()
	},
	"exit": func(p *int) string {
		if p == nil {
			return "–"
		}
		return fmt.Sprint(*p)
	},
	"str": func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	},
	"terminal": func(s jobs.Status) bool { return s.Terminal() },
	"isImage": func(ctype string) bool {
		switch strings.TrimSpace(strings.SplitN(ctype, ";", 2)[0]) {
		case "image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml":
			return true // an <img> never runs an SVG's scripts
		}
		return false
	},
	// argv shows a command's arguments on one line, each quoted (as a Go
	// string) where a space, a quote or a shell character would blur
	// where it begins and ends.
	"argv": func(args []string) string {
		out := make([]string, len(args))
		for i, a := range args {
			out[i] = a
			if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`|&;<>()*?[]#~") {
				out[i] = strconv.Quote(a)
			}
		}
		return strings.Join(out, " ")
	},
	"path":   localapi.PathEscape,
	"join":   strings.Join,
	"prefix": func() string { return Prefix },
}

// formatBytes shows n bytes in the largest binary unit below it.
func formatBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
