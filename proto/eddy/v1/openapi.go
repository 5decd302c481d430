package eddyv1

import _ "embed"

// OpenAPI is the OpenAPI (Swagger 2.0) description of the REST gateway of
// the Control service, generated with control.pb.gw.go from the HTTP rules
// of control_http.yaml (make proto; make proto-check keeps it current).
//
//go:embed control.swagger.json
var OpenAPI []byte
