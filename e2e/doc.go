// Package e2e runs the real hf-node and hf-cli binaries, built once per test
// run, the way an operator would.
//
// The native driver tests need root (and useradd/userdel), the docker driver
// test a Docker Engine and a static busybox; without them those tests are
// skipped, except under CI (CI set), where they fail.
package e2e
