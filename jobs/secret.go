package jobs

import "time"

// Secret is a tenant's secret as the API shows it: never its value.
type Secret struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SecretRequest sets a secret's value (PUT /v1/secrets/{name}).
type SecretRequest struct {
	Value string `json:"value"`
}

// MaxSecretBytes bounds a secret's value.
const MaxSecretBytes = MaxHeaderValue

// SecretSealContext is what a tenant's secret name is sealed to (under
// GANTRY_SECRET_KEY): the ingress seals, the runner opens, and a sealed
// value copied to another tenant or name does not open.
func SecretSealContext(tenantID, name string) string { return "egress-secret:" + tenantID + ":" + name }
