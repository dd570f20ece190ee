package jobs

import "regexp"

// Environments are the named sandbox images an operator registers (gantry
// environments add NAME IMAGE): images derived from gantry's sandbox image
// with the packages some jobs need. A job or session chooses one by name;
// without one it runs in the runner's own image (GANTRY_IMAGE), which is
// also the environment named DefaultEnvironment.

// DefaultEnvironment names the runner's own sandbox image.
const DefaultEnvironment = "default"

// EnvironmentNamePattern is what an environment's name looks like.
const EnvironmentNamePattern = `^[a-z][a-z0-9-]{0,39}$`

var environmentNameRE = regexp.MustCompile(EnvironmentNamePattern)

// ValidEnvironmentName reports whether name has an environment name's form.
func ValidEnvironmentName(name string) bool { return environmentNameRE.MatchString(name) }

// Environment is an environment as a tenant sees it: its name and what
// the operator says it holds (never its image).
type Environment struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Default is true for the environment jobs get when they name none.
	Default bool `json:"default"`
}

// normalizeEnvironment checks a request's environment field; "" and
// DefaultEnvironment both mean the default ("").
func normalizeEnvironment(name string) (string, error) {
	switch {
	case name == "" || name == DefaultEnvironment:
		return "", nil
	case !ValidEnvironmentName(name):
		return "", fieldErr("environment", "%q is not an environment's name (lowercase letters, digits and '-'; GET /v1/environments lists yours)", name)
	}
	return name, nil
}
