// Command hf-cli administers an hf fleet through its REST API.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/hf-fleet/hf/cmd/hf-cli/internal/cmd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cmd.Main(ctx, cmd.OSEnv(version), os.Args[1:])
	stop()
	os.Exit(code)
}
