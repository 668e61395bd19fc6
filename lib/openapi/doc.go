// Package openapi is hf's REST API: the OpenAPI document (openapi.yaml, the source
// of truth), the gin handlers that serve every kind of lib/types from lib/store,
// bearer-token auth with the admin and user roles, server-sent event watches, and
// the one place where errors become HTTP status codes.
//
// Request flow:
//
//	gin -> recovery (500 internal, logged) -> metrics -> route
//	  /healthz /readyz /openapi.yaml /metrics             no auth
//	  /api/v1/...  -> auth (Bearer, constant time) -> role check -> handler
//	     handler: read body (1 MiB) -> strict decode -> kind/name checks ->
//	              validate -> store.Put/Delete -> JSON object or error
package openapi
