// Package e2e runs the real hf-node and hf-cli binaries, built once per test
// run, the way an operator would.
package e2e
