package cmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/types"
)

// objectAction is a POST to an object's action endpoint, as a command
// `<resource> <verb> NAME`: `node drain|undrain`, `session keepalive`.
type objectAction struct {
	kind, verb, short string
	// done is what the table output says was done ("drained").
	done string
}

var (
	drainAction     = objectAction{kind: types.KindNode, verb: "drain", done: "drained", short: "Stop placing new machines on a node (maintenance)"}
	undrainAction   = objectAction{kind: types.KindNode, verb: "undrain", done: "undrained", short: "Let a drained node take new machines again"}
	keepaliveAction = objectAction{kind: types.KindSession, verb: "keepalive", done: "kept alive", short: "Say a session is still in use (resumes a paused one)"}
)

// newActionCmd builds the command of an object action.
func newActionCmd(f *Factory, a objectAction) *cobra.Command {
	return &cobra.Command{
		Use:   a.verb + " NAME",
		Short: a.short,
		Args:  exactArgs(1, "one NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			return runAction(c.Context(), f, a, args[0])
		},
	}
}

func runAction(ctx context.Context, f *Factory, a objectAction, name string) error {
	c, err := f.Client()
	if err != nil {
		return err
	}
	ctx, cancel := f.requestContext(ctx)
	defer cancel()
	obj, err := c.Action(ctx, a.kind, name, a.verb)
	if err != nil {
		return err
	}
	p := f.printer()
	if p.structured() && obj != nil {
		return p.encode(obj)
	}
	p.done(a.kind, name, a.done)
	return nil
}
