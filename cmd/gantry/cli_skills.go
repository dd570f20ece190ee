package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gantryhq/gantry/skills"
)

const skillsUsage = `Usage:
  gantry skills ls [-q TEXT] [--json]          your skills and the built-ins; with -q, ranked by relevance
  gantry skills get NAME [--version N] [--json]  print a skill's SKILL.md
  gantry skills push DIR [--json]               save the skill folder DIR (SKILL.md and its files) as a new version
  gantry skills pull NAME [--version N] [-o DIR] [--force]
                                               download a skill into DIR/NAME (default DIR: .)
`

func cmdSkills(ctx context.Context, args []string) error {
	sub, args, c, err := subcommand("skills", skillsUsage, args)
	if c == nil {
		return err // a usage error, or help printed
	}
	switch sub {
	case "ls", "list", "search":
		q := c.fs.String("q", "", "")
		pos, err := c.parse(args, 0, 1)
		if err != nil {
			return err
		}
		if len(pos) == 1 && *q == "" {
			*q = pos[0] // gantry skills search chart
		}
		query := url.Values{}
		if *q != "" {
			query.Set("q", *q)
		}
		var list struct {
			Skills []struct {
				Name, Description string
				Version           int
				Builtin           bool
			}
		}
		if printed, err := c.fetch(ctx, request{method: "GET", path: "/v1/skills", query: query}, &list); printed || err != nil {
			return err
		}
		tw := newTable()
		fmt.Fprintln(tw, "NAME\tVERSION\tDESCRIPTION")
		for _, s := range list.Skills {
			v := strconv.Itoa(s.Version)
			if s.Builtin {
				v = "built-in"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, v, oneLine(s.Description, 80))
		}
		return tw.Flush()

	case "get", "show":
		ver := c.fs.Int("version", 0, "")
		pos, err := c.parse(args, 1, 1)
		if err != nil {
			return err
		}
		var sk struct {
			SkillMD string `json:"skill_md"`
			Files   []struct{ Path string }
		}
		if printed, err := c.fetch(ctx, request{method: "GET", path: "/v1/skills/" + url.PathEscape(pos[0]), query: versionQuery(*ver)}, &sk); printed || err != nil {
			return err
		}
		fmt.Print(sk.SkillMD)
		for _, f := range sk.Files {
			fmt.Fprintf(os.Stderr, "gantry: file %s (gantry skills pull %s downloads them)\n", f.Path, pos[0])
		}
		return nil

	case "push":
		pos, err := c.parse(args, 1, 1)
		if err != nil {
			return err
		}
		name, archive, err := zipSkill(pos[0])
		if err != nil {
			return &exitError{code: 1, msg: err.Error()}
		}
		a, err := newAPI()
		if err != nil {
			return apiErr(err)
		}
		var saved struct {
			Name    string
			Version int
		}
		var raw json.RawMessage
		if err := a.json(ctx, request{method: "PUT", path: "/v1/skills/" + url.PathEscape(name), body: archive,
			contentType: "application/zip", idempotent: false}, nil, &raw); err != nil {
			return apiErr(err)
		}
		if c.json {
			return printJSON(raw)
		}
		if err := json.Unmarshal(raw, &saved); err != nil {
			return err
		}
		fmt.Printf("saved %s version %d\n", saved.Name, saved.Version)
		return nil

	case "pull":
		ver := c.fs.Int("version", 0, "")
		dir := c.fs.String("o", ".", "")
		force := c.fs.Bool("force", false, "")
		pos, err := c.parse(args, 1, 1)
		if err != nil {
			return err
		}
		a, err := newAPI()
		if err != nil {
			return apiErr(err)
		}
		q := versionQuery(*ver)
		q.Set("format", "zip")
		resp, err := a.do(ctx, request{method: "GET", path: "/v1/skills/" + url.PathEscape(pos[0]), query: q, idempotent: true})
		if err != nil {
			return apiErr(err)
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, skills.MaxArchiveBytes+1))
		resp.Body.Close()
		if err != nil {
			return apiErr(&connError{base: a.base, configPath: a.configPath, err: err})
		}
		// The archive is read as the server reads uploads: no links, no
		// paths leaving the folder, sizes capped.
		sk, err := skills.ReadArchive(skills.FormatZip, data)
		if err != nil {
			return apiErr(fmt.Errorf("the skill archive the server sent is not valid: %w", err))
		}
		dest := filepath.Join(*dir, sk.Name)
		if err := writeSkill(dest, sk, *force); err != nil {
			return apiErr(err)
		}
		fmt.Printf("wrote %s (version %d, %d file(s))\n", dest, sk.Version, len(sk.Files)+1)
		return nil
	}
	return &usageError{msg: fmt.Sprintf("unknown subcommand %q", sub), usage: skillsUsage}
}

func versionQuery(v int) url.Values {
	q := url.Values{}
	if v > 0 {
		q.Set("version", strconv.Itoa(v))
	}
	return q
}

// zipSkill reads the skill folder dir (SKILL.md and the regular files
// under it) into a zip, and returns the skill's name from its front matter.
func zipSkill(dir string) (string, []byte, error) {
	md, err := os.ReadFile(filepath.Join(dir, skills.SkillFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, fmt.Errorf("%s has no %s: a skill folder holds one", dir, skills.SkillFileName)
	}
	if err != nil {
		return "", nil, err
	}
	sk, err := skills.Parse(md)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", filepath.Join(dir, skills.SkillFileName), err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && (d.Name() == ".git" || d.Name() == "__pycache__" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file (skills hold no links or devices)", p)
		}
		rel, _ := filepath.Rel(dir, p)
		w, err := zw.Create(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
	if err == nil {
		err = zw.Close()
	}
	return sk.Name, buf.Bytes(), err
}

// writeSkill writes a skill's folder: SKILL.md and its files.
func writeSkill(dest string, sk skills.Skill, force bool) error {
	if entries, err := os.ReadDir(dest); err == nil && len(entries) > 0 && !force {
		return fmt.Errorf("%s exists and is not empty (--force writes over it)", dest)
	}
	files := append([]skills.File{{Path: skills.SkillFileName, Content: sk.Markdown()}}, sk.Files...)
	for _, f := range files {
		p := filepath.Join(dest, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(f.Content), 0o644); err != nil {
			return err
		}
	}
	return nil
}
