package httpapi

import (
	"fmt"
	"maps"
	"strings"

	"github.com/gantryhq/gantry/codemode"
	"github.com/gantryhq/gantry/ingress/openapi"
	"github.com/gantryhq/gantry/jobs"
	"github.com/gantryhq/gantry/skills"
)

// constraint is a pattern or an enum of the contract that a package other
// than this one owns, laid over the prose of openapi.yaml: the value comes
// from that package, so the document cannot drift from the code that
// checks it.
type constraint struct {
	// at is where: schemas.<component>.<property>, or a path into one of
	// the shared components (parameters.<name>.schema).
	at string
	// set are the keywords to set there; the prose must not have them.
	set js
}

// constraints are every constraint of the document. (String enums of a
// type of their own, such as jobs.Status, come with the type: see the
// openapi package.)
func constraints() []constraint {
	languages := js{"enum": openapi.Enum(jobs.LanguageNamesAndAliases())}
	encodings := js{"enum": openapi.Enum(jobs.Encodings)}
	skillName := js{"pattern": skills.NamePattern}
	skillLanguages := js{"enum": openapi.Enum(skills.Languages)}
	serverName := js{"pattern": codemode.NamePattern}
	envName := js{"pattern": jobs.EnvironmentNamePattern}
	return []constraint{
		{"schemas.Environment.name", envName},
		{"schemas.JobRequest.language", languages},
		{"schemas.SessionRequest.language", languages},
		{"schemas.InputFile.encoding", encodings},
		{"schemas.JobRequest.stdin_encoding", encodings},
		{"schemas.JobSpec.stdin_encoding", encodings},
		{"schemas.SkillFile.encoding", encodings},
		{"schemas.SkillSummary.name", skillName},
		{"schemas.Skill.name", skillName},
		{"schemas.SkillVersions.name", skillName},
		{"parameters.SkillName.schema", skillName},
		{"schemas.SkillSummary.language", skillLanguages},
		{"schemas.Skill.language", skillLanguages},
		{"schemas.SkillPut.language", skillLanguages},
		{"schemas.McpServerRegistration.name", serverName},
		{"schemas.McpServer.name", serverName},
		{"schemas.ToolInfo.server", serverName},
		{"parameters.McpServerName.schema", serverName},
	}
}

// apply lays the constraint over the prose.
func (c constraint) apply(p *prose) error {
	root, rest, _ := strings.Cut(c.at, ".")
	var target js
	switch root {
	case "schemas":
		name, prop, ok := strings.Cut(rest, ".")
		if !ok {
			return fmt.Errorf("constraint at %s: name a property", c.at)
		}
		n := p.Schemas[name]
		if n.Properties == nil {
			n.Properties = map[string]js{}
		}
		if n.Properties[prop] == nil {
			n.Properties[prop] = js{}
		}
		if p.Schemas == nil {
			p.Schemas = map[string]openapi.Note{}
		}
		p.Schemas[name] = n
		target = n.Properties[prop]
	case "parameters":
		target = p.Parameters
		for _, key := range strings.Split(rest, ".") {
			next, ok := target[key].(js)
			if !ok {
				return fmt.Errorf("constraint at %s: openapi.yaml has no %s", c.at, key)
			}
			target = next
		}
	default:
		return fmt.Errorf("constraint at %s: no such place", c.at)
	}
	for k := range c.set {
		if _, ok := target[k]; ok {
			return fmt.Errorf("openapi.yaml sets %s at %s, which comes from Go (contract.go): remove it", k, c.at)
		}
	}
	maps.Copy(target, c.set)
	return nil
}
