package ingress

import _ "embed"

// openapiJSON is the OpenAPI 3.1 description of the HTTP API, served at
// /openapi.json. A test checks it against Routes.
//
//go:embed openapi.json
var openapiJSON []byte
