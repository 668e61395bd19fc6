package main

import (
	"os"
	"os/signal"
)

// holdIgnored catches each of sigs that the process was started ignoring,
// and drops it: the node still ignores it, but through a handler, and a
// handled signal is reset to its default in a process the node starts,
// where an ignored one stays ignored. Without this a node started under
// nohup gives every machine's entry and shell an ignored SIGHUP: a shell
// whose client left outlives its hang-up until it is killed. It returns the
// signals it holds. Call it before any signal.Notify, which forgets that a
// signal was ignored.
//
// The handler is process-wide state, so this belongs to main, not to a
// driver: a library must not change what the process does on a signal.
func holdIgnored(sigs ...os.Signal) []os.Signal {
	var held []os.Signal
	for _, s := range sigs {
		if signal.Ignored(s) {
			held = append(held, s)
		}
	}
	if len(held) > 0 {
		// Never read: package signal drops a signal that finds it full,
		// which is how the node goes on ignoring it.
		signal.Notify(make(chan os.Signal, 1), held...)
	}
	return held
}
