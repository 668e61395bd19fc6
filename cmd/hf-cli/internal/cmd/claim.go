package cmd

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/types"
)

// claimCreateOptions are the options of `claim create`.
type claimCreateOptions struct {
	f   *Factory
	res *resource

	file         string
	name         string
	template     string
	user         string
	accessCode   string
	event        string
	environment  string
	bindStrategy string
	machineSets  []string
	labels       []string
	meta         []string
	bindTimeout  time.Duration
	wait         bool
	waitTimeout  time.Duration
}

func newClaimCreateCmd(f *Factory, res *resource) *cobra.Command {
	opts := &claimCreateOptions{f: f, res: res}
	c := &cobra.Command{
		Use:   "create [NAME] --template T | -f FILE",
		Short: "Claim a machine (or create claims from a file)",
		Long: "Create a claim for a machine of a template. NAME defaults to claim-<random>.\n" +
			"With --wait, progress goes to stderr and the bound claim to stdout; a claim\n" +
			"that fails exits 6 with its reason.",
		Example: "  hf-cli claim create --template small --user alice --wait\n" +
			"  hf-cli claim create ci-42 --template big --label job=ci --meta BUILD_SHA=abc123\n" +
			"  hf-cli claim create -f claims.yaml",
		Args: maxArgs(1, "one NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.name = args[0]
			}
			if opts.file != "" {
				claimFlags := []string{"template", "user", "access-code", "event", "environment", "bind-strategy",
					"machine-set", "label", "meta", "bind-timeout", "wait", "wait-timeout"}
				if countSet(c, claimFlags...) > 0 || opts.name != "" {
					return usageErrorf("claim create -f takes no NAME and no claim flags")
				}
				return runFile(c.Context(), &fileOptions{f: f, op: fileCreate, file: opts.file, kind: res.Kind})
			}
			if !opts.wait && flagSet(c.Flags(), "wait-timeout") {
				return usageErrorf("--wait-timeout needs --wait")
			}
			return runClaimCreate(c.Context(), opts)
		},
	}
	fl := c.Flags()
	fl.StringVarP(&opts.file, "filename", "f", "", "create the claims of a YAML or JSON file (- for stdin)")
	fl.StringVarP(&opts.template, "template", "t", "", "machine template (required without -f)")
	fl.StringVar(&opts.user, "user", "", "user the machine is for")
	fl.StringVar(&opts.accessCode, "access-code", "", "the secret of an access code granting the machine (its spec.code, not its name)")
	fl.StringVar(&opts.event, "event", "", "scheduled event the claim belongs to")
	fl.StringVar(&opts.environment, "environment", "", "environment to allocate in")
	fl.StringVar(&opts.bindStrategy, "bind-strategy", "", "Any, PreferMachineSets or RequireMachineSets")
	fl.StringArrayVar(&opts.machineSets, "machine-set", nil, "machine set to bind from (repeatable)")
	fl.StringArrayVar(&opts.labels, "label", nil, "label k=v of the claim (repeatable)")
	fl.StringArrayVar(&opts.meta, "meta", nil, "metadata k=v passed to the machine (repeatable)")
	fl.DurationVar(&opts.bindTimeout, "bind-timeout", 0, "fail the claim if it is not bound within this long (default: the server's)")
	fl.BoolVar(&opts.wait, "wait", false, "wait until the claim is Bound or Failed, showing progress")
	waitTimeoutFlag(fl, &opts.waitTimeout, 2*time.Minute, "give up waiting after this long (exit 6)")
	return c
}

// countSet counts which of the named flags were given.
func countSet(c *cobra.Command, names ...string) int {
	n := 0
	for _, name := range names {
		if flagSet(c.Flags(), name) {
			n++
		}
	}
	return n
}

// buildClaim turns the options into a claim, checking what the server would
// reject anyway so mistakes are usage errors.
func buildClaim(opts *claimCreateOptions, rnd io.Reader) (*types.MachineClaim, error) {
	if opts.template == "" {
		return nil, usageErrorf("claim create needs --template T (or -f FILE)")
	}
	name := opts.name
	if name == "" {
		var err error
		if name, err = claimName(rnd); err != nil {
			return nil, err
		}
	}
	labels, err := keyValues("--label", opts.labels)
	if err != nil {
		return nil, err
	}
	meta, err := keyValues("--meta", opts.meta)
	if err != nil {
		return nil, err
	}
	if opts.bindTimeout < 0 {
		return nil, usageErrorf("--bind-timeout must not be negative")
	}
	cl := &types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: name, Labels: labels},
		Spec: types.MachineClaimSpec{
			MachineTemplate: opts.template,
			User:            opts.user,
			AccessCode:      opts.accessCode,
			ScheduledEvent:  opts.event,
			Environment:     opts.environment,
			BindStrategy:    types.BindStrategy(opts.bindStrategy),
			MachineSets:     opts.machineSets,
			BindTimeout:     types.D(opts.bindTimeout),
			Metadata:        meta,
		},
	}
	if err := cl.Validate(); err != nil {
		return nil, usageErrorf("%v", err)
	}
	return cl, nil
}

// claimName generates "claim-" and 8 random hex digits, a valid DNS label.
func claimName(rnd io.Reader) (string, error) {
	var b [4]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return "", fmt.Errorf("generate claim name: %w", err)
	}
	return "claim-" + hex.EncodeToString(b[:]), nil
}

// keyValues parses repeated k=v flags.
func keyValues(flag string, values []string) (map[string]string, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(values))
	for _, v := range values {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, usageErrorf("%s %q: want key=value", flag, v)
		}
		out[k] = val
	}
	return out, nil
}

func runClaimCreate(ctx context.Context, opts *claimCreateOptions) error {
	f := opts.f
	cl, err := buildClaim(opts, f.Rand)
	if err != nil {
		return err
	}
	c, err := f.Client()
	if err != nil {
		return err
	}
	rctx, cancel := f.requestContext(ctx)
	created, err := c.Create(rctx, cl)
	cancel()
	if err != nil {
		return err
	}
	if !opts.wait {
		return f.printer().objects(opts.res, []types.Object{created}, false)
	}
	bound, err := waitClaim(ctx, f, c, cl.Metadata.Name, opts.waitTimeout)
	if err != nil {
		return err
	}
	return f.printer().objects(opts.res, []types.Object{bound}, false)
}
