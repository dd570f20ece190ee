package test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var metricRef = regexp.MustCompile(`\bgantry_[a-z0-9_]+`)

// declaredMetrics are the metric names gantry's code declares (Name: or
// NewDesc), found in its Go sources.
func declaredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?:Name:\s*|NewDesc\()"(gantry_[a-z0-9_]+)"`)
	out := map[string]bool{}
	err := filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != ".." && (d.Name() == "node_modules" || d.Name() == "bin" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMonitoringNamesRealMetrics: every metric the Grafana dashboard and
// the alert rules in deploy/monitoring read is one gantry exports, every
// panel reads the datasource the dashboard asks for, and the README's
// operating section explains every alert.
func TestMonitoringNamesRealMetrics(t *testing.T) {
	declared := declaredMetrics(t)
	if len(declared) < 15 {
		t.Fatalf("found only %d declared metrics: %v", len(declared), declared)
	}
	used := map[string]bool{}
	known := func(name string) bool {
		for _, suffix := range []string{"", "_bucket", "_count", "_sum"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && declared[base] {
				used[base] = true
				return true
			}
		}
		return false
	}
	raw, err := os.ReadFile("../deploy/monitoring/gantry-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Type, Title string
			Datasource  struct{ UID string }
			Targets     []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %q, %d targets", p.Title, p.Datasource.UID, len(p.Targets))
		}
		for _, tg := range p.Targets {
			for _, m := range metricRef.FindAllString(tg.Expr, -1) {
				if !known(m) {
					t.Errorf("panel %q reads %s, which gantry does not export", p.Title, m)
				}
			}
		}
	}
	rules, err := os.ReadFile("../deploy/monitoring/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, line := range strings.Split(string(rules), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "- alert: "); ok {
			alerts = append(alerts, name)
		}
		if strings.HasPrefix(strings.TrimSpace(line), "expr:") || strings.HasPrefix(line, "          ") {
			for _, m := range metricRef.FindAllString(line, -1) {
				if !known(m) {
					t.Errorf("alerts.yaml reads %s, which gantry does not export", m)
				}
			}
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts {
		if !strings.Contains(string(readme), "`"+a+"`") {
			t.Errorf("README.md does not explain the alert %s", a)
		}
	}
	var unused []string
	for m := range declared {
		if !used[m] {
			unused = append(unused, m)
		}
	}
	sort.Strings(unused)
	t.Logf("%d metrics declared, %d on the dashboard; not on it: %v", len(declared), len(used), unused)
}
