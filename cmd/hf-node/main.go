// Command hf-node is the hf daemon: every host of the fleet runs one.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// The only signals the Go runtime leaves ignored when the process starts
	// with them ignored (it catches SIGQUIT and SIGTERM all the same);
	// before NotifyContext, which forgets that SIGINT was.
	held := holdIgnored(syscall.SIGHUP, syscall.SIGINT)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The first signal stops the node gracefully; after it the signals are
	// the system's again, so a second one ends the process at once (but for
	// a SIGINT the node was started ignoring: held, it stays ignored).
	go func() {
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, held))
}
