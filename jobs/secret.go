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
