package cmd

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/types"
)

// codeCreateOptions are the options of `code create`.
type codeCreateOptions struct {
	f   *Factory
	res *resource

	file      string
	name      string
	code      string
	sets      []string
	events    []string
	notBefore string
	notAfter  string
}

func newCodeCreateCmd(f *Factory, res *resource) *cobra.Command {
	opts := &codeCreateOptions{f: f, res: res}
	c := &cobra.Command{
		Use:   "create NAME --code C | -f FILE",
		Short: "Create an access code (or access codes from a file)",
		Long: "Create an access code granting machine sets and scheduled events to whoever\n" +
			"presents it. --not-before and --not-after bound when it works (RFC 3339 times).",
		Example: "  hf-cli code create workshop --code s3cret-42 --set pool --event ws-may\n" +
			"  hf-cli code create late --code late-key --not-before 2026-05-01T09:00:00Z --not-after 2026-05-01T17:00:00Z\n" +
			"  hf-cli code create -f codes.yaml",
		Args: maxArgs(1, "one NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.name = args[0]
			}
			if opts.file != "" {
				if countSet(c, "code", "set", "event", "not-before", "not-after") > 0 || opts.name != "" {
					return usageErrorf("code create -f takes no NAME and no code flags")
				}
				return runFile(c.Context(), &fileOptions{f: f, op: fileCreate, file: opts.file, kind: res.Kind})
			}
			return runCodeCreate(c.Context(), opts)
		},
	}
	fl := c.Flags()
	fl.StringVarP(&opts.file, "filename", "f", "", "create the access codes of a YAML or JSON file (- for stdin)")
	fl.StringVar(&opts.code, "code", "", "the key users present, 4 to 128 characters (required without -f)")
	fl.StringArrayVar(&opts.sets, "set", nil, "machine set the code grants (repeatable)")
	fl.StringArrayVar(&opts.events, "event", nil, "scheduled event the code grants (repeatable)")
	fl.StringVar(&opts.notBefore, "not-before", "", "the code works from this RFC 3339 time on")
	fl.StringVar(&opts.notAfter, "not-after", "", "the code stops working at this RFC 3339 time")
	return c
}

// buildAccessCode turns the options into an access code, checking what the
// server would reject anyway so mistakes are usage errors naming the flag.
func buildAccessCode(opts *codeCreateOptions) (*types.AccessCode, error) {
	if opts.name == "" {
		return nil, usageErrorf("code create needs NAME (or -f FILE)")
	}
	if err := types.ValidateName("NAME", opts.name); err != nil {
		return nil, usageErrorf("%v (got %q)", err, opts.name)
	}
	if opts.code == "" {
		return nil, usageErrorf("code create needs --code C (or -f FILE)")
	}
	if n := len(opts.code); n < 4 || n > 128 {
		return nil, usageErrorf("--code must be 4 to 128 characters, got %d", n)
	}
	for _, refs := range []struct {
		flag  string
		names []string
	}{{"--set", opts.sets}, {"--event", opts.events}} {
		for _, n := range refs.names {
			if err := types.ValidateName(refs.flag, n); err != nil {
				return nil, usageErrorf("%v (got %q)", err, n)
			}
		}
	}
	notBefore, err := parseTimeFlag("--not-before", opts.notBefore)
	if err != nil {
		return nil, err
	}
	notAfter, err := parseTimeFlag("--not-after", opts.notAfter)
	if err != nil {
		return nil, err
	}
	if !notBefore.IsZero() && !notAfter.IsZero() && !notAfter.After(notBefore) {
		return nil, usageErrorf("--not-after %s must be after --not-before %s", opts.notAfter, opts.notBefore)
	}
	ac := &types.AccessCode{
		TypeMeta: types.TypeMeta{Kind: types.KindAccessCode},
		Metadata: types.ObjectMeta{Name: opts.name},
		Spec: types.AccessCodeSpec{
			Code:            opts.code,
			MachineSets:     opts.sets,
			ScheduledEvents: opts.events,
			NotBefore:       notBefore,
			NotAfter:        notAfter,
		},
	}
	if err := ac.Validate(); err != nil {
		return nil, usageErrorf("%v", err)
	}
	return ac, nil
}

// parseTimeFlag parses an optional RFC 3339 time; empty is the zero time.
func parseTimeFlag(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usageErrorf("%s %q: want an RFC 3339 time such as 2026-05-01T09:00:00Z", flag, v)
	}
	return t.UTC(), nil
}

func runCodeCreate(ctx context.Context, opts *codeCreateOptions) error {
	f := opts.f
	ac, err := buildAccessCode(opts)
	if err != nil {
		return err
	}
	c, err := f.Client()
	if err != nil {
		return err
	}
	ctx, cancel := f.requestContext(ctx)
	defer cancel()
	created, err := c.Create(ctx, ac)
	if err != nil {
		return err
	}
	return f.printer().objects(opts.res, []types.Object{created}, false)
}
