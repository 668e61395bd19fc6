package cmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/types"
)

// scaleOptions are the options of `set scale`.
type scaleOptions struct {
	f    *Factory
	name string
	min  int
	max  int
	// setMin and setMax say which of --min and --max were given.
	setMin, setMax bool
}

// newScaleCmd builds `set scale NAME [--min N] [--max M]`: either flag
// alone changes that value and keeps the set's other one.
func newScaleCmd(f *Factory) *cobra.Command {
	opts := &scaleOptions{f: f}
	c := &cobra.Command{
		Use:   "scale NAME [--min N] [--max M]",
		Short: "Change how many warm machines a set keeps, how many it may provision, or both",
		Long: "Set a machine set's spec.minAvailable (--min) and spec.maxProvisioned (--max,\n" +
			"0 for no limit); give one or both. A flag left out keeps the set's value, and\n" +
			"the two must still agree (minAvailable at most maxProvisioned, unless that is 0).\n" +
			"A --max below the set's live machines deletes none: claimed machines stay until\n" +
			"their claims end, and the set creates no more until it is below the limit.\n" +
			"The set is read and written back conditionally on the version read, so a\n" +
			"concurrent change fails the command (exit 5) instead of being lost.\n" +
			"A set a scheduled event made is the event's to size: the server refuses to\n" +
			"scale it (exit 5, naming the event); change the event instead.",
		Example: "  hf-cli set scale pool --min 3\n" +
			"  hf-cli set scale pool --min 3 --max 10\n" +
			"  hf-cli set scale pool --max 0    # lift the limit, keep minAvailable",
		Args: exactArgs(1, "one NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.name = args[0]
			opts.setMin = flagSet(c.Flags(), "min")
			opts.setMax = flagSet(c.Flags(), "max")
			return runScale(c.Context(), opts)
		},
	}
	c.Flags().IntVar(&opts.min, "min", 0, "unclaimed machines to keep ready (spec.minAvailable)")
	c.Flags().IntVar(&opts.max, "max", 0, "most live machines the set may have, 0 for no limit (spec.maxProvisioned)")
	return c
}

// checkScaleFlags rejects what is wrong whatever the set holds, before any
// request is sent.
func checkScaleFlags(opts *scaleOptions) error {
	switch {
	case !opts.setMin && !opts.setMax:
		return usageErrorf("set scale needs --min N, --max M or both")
	case opts.setMin && opts.min < 0:
		return usageErrorf("--min must not be negative, got %d", opts.min)
	case opts.setMax && opts.max < 0:
		return usageErrorf("--max must not be negative, got %d", opts.max)
	case opts.setMin && opts.setMax && opts.max > 0 && opts.min > opts.max:
		return usageErrorf("--min %d exceeds --max %d", opts.min, opts.max)
	}
	return nil
}

// scaleSpec applies the flags to spec. A flag left out keeps the set's value,
// which may then contradict the one given: the error names the flag to fix.
func scaleSpec(spec *types.MachineSetSpec, opts *scaleOptions) error {
	lo, hi := spec.MinAvailable, spec.MaxProvisioned
	if opts.setMin {
		lo = opts.min
	}
	if opts.setMax {
		hi = opts.max
	}
	if hi > 0 && lo > hi {
		if !opts.setMax {
			return usageErrorf("--min %d exceeds the set's maxProvisioned %d (raise it with --max)", lo, hi)
		}
		return usageErrorf("--max %d is below the set's minAvailable %d (lower it with --min)", hi, lo)
	}
	spec.MinAvailable, spec.MaxProvisioned = lo, hi
	return nil
}

func runScale(ctx context.Context, opts *scaleOptions) error {
	if err := checkScaleFlags(opts); err != nil {
		return err
	}
	f := opts.f
	c, err := f.Client()
	if err != nil {
		return err
	}
	ctx, cancel := f.requestContext(ctx)
	defer cancel()
	o, err := c.Get(ctx, types.KindMachineSet, opts.name)
	if err != nil {
		return err
	}
	set, ok := o.(*types.MachineSet)
	if !ok {
		return fmt.Errorf("get machineset %q: got a %T", opts.name, o)
	}
	if err := scaleSpec(&set.Spec, opts); err != nil {
		return err
	}
	// set still carries the version read: Update sends it as If-Match.
	updated, err := c.Update(ctx, set)
	if err != nil {
		return err
	}
	p := f.printer()
	if p.structured() {
		return p.encode(updated)
	}
	p.done(types.KindMachineSet, opts.name,
		fmt.Sprintf("scaled (min %d, max %d)", set.Spec.MinAvailable, set.Spec.MaxProvisioned))
	return nil
}
