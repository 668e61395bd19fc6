package cmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/types"
)

// objectAction is a POST to an object's action endpoint, as a command
// `<resource> <verb> NAME`: `node drain|undrain`, `session keepalive`.
type objectAction struct {
	kind, use, short string
	// done is what the table output says was done ("drained").
	done string
	call func(ctx context.Context, c *client.Client, name string) (types.Object, error)
}

var (
	drainAction = objectAction{kind: types.KindNode, use: "drain NAME", done: "drained",
		short: "Stop placing new machines on a node (maintenance)",
		call: func(ctx context.Context, c *client.Client, name string) (types.Object, error) {
			return nilIfNone(c.Drain(ctx, name))
		}}
	undrainAction = objectAction{kind: types.KindNode, use: "undrain NAME", done: "undrained",
		short: "Let a drained node take new machines again",
		call: func(ctx context.Context, c *client.Client, name string) (types.Object, error) {
			return nilIfNone(c.Undrain(ctx, name))
		}}
	keepaliveAction = objectAction{kind: types.KindSession, use: "keepalive NAME", done: "kept alive",
		short: "Say a session is still in use (resumes a paused one)",
		call: func(ctx context.Context, c *client.Client, name string) (types.Object, error) {
			return nilIfNone(c.Keepalive(ctx, name))
		}}
)

// nilIfNone turns a typed nil object into an untyped nil.
func nilIfNone[T interface {
	types.Object
	comparable
}](o T, err error) (types.Object, error) {
	var zero T
	if err != nil || o == zero {
		return nil, err
	}
	return o, nil
}

// newActionCmd builds the command of an object action.
func newActionCmd(f *Factory, a objectAction) *cobra.Command {
	return &cobra.Command{
		Use:   a.use,
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
	obj, err := a.call(ctx, c, name)
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
