package types

import "time"

// AuditRecord is one write through a node's API: who (the token's name,
// role and user) changed what, when, through which node, and how it ended
// (GET /api/v1/audit).
type AuditRecord struct {
	Time   time.Time `json:"time"`
	Node   string    `json:"node,omitempty"`
	Method string    `json:"method"`
	Path   string    `json:"path"`
	Kind   string    `json:"kind,omitempty"`
	Name   string    `json:"name,omitempty"`
	Status int       `json:"status"`
	Token  string    `json:"token"`
	Role   string    `json:"role"`
	User   string    `json:"user"`
}
