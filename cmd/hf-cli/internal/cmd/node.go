package cmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/types"
)

// drainOptions are the options of `node drain|undrain`.
type drainOptions struct {
	f     *Factory
	drain bool
	name  string
}

// newDrainCmd builds `node drain NAME` (drain true) or `node undrain NAME`.
// Both call POST /api/v1/nodes/{name}/drain|undrain.
func newDrainCmd(f *Factory, drain bool) *cobra.Command {
	opts := &drainOptions{f: f, drain: drain}
	c := &cobra.Command{
		Use:   "drain NAME",
		Short: "Stop placing new machines on a node (maintenance)",
		Args:  exactArgs(1, "one NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.name = args[0]
			return runDrain(c.Context(), opts)
		},
	}
	if !drain {
		c.Use = "undrain NAME"
		c.Short = "Let a drained node take new machines again"
	}
	return c
}

func runDrain(ctx context.Context, opts *drainOptions) error {
	f := opts.f
	c, err := f.Client()
	if err != nil {
		return err
	}
	ctx, cancel := f.requestContext(ctx)
	defer cancel()
	drain, what := c.Drain, "drained"
	if !opts.drain {
		drain, what = c.Undrain, "undrained"
	}
	n, err := drain(ctx, opts.name)
	if err != nil {
		return err
	}
	p := f.printer()
	if p.structured() && n != nil {
		return p.encode(n)
	}
	p.done(types.KindNode, opts.name, what)
	return nil
}
