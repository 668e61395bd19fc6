// Package types is the hf resource model: one file per kind, plain structs with
// JSON tags in the shape {kind, metadata, spec, status} and a Validate method that
// names the bad field. It imports the standard library only.
package types
