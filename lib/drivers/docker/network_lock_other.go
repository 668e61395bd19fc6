//go:build !unix

package docker

import "context"

// lockNetwork does nothing here: ensureNetwork's settle-and-pick alone
// resolves nodes racing to create the network.
func lockNetwork(context.Context, string, string, string) (unlock func()) { return func() {} }

// networkLockDir is where the locks would be.
func networkLockDir() string { return "" }
