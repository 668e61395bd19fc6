package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/client"
)

func newProfileCmd(f *Factory) *cobra.Command {
	c := groupCmd(&cobra.Command{
		Use:     "profile",
		Aliases: []string{"profiles"},
		Short:   "Manage saved endpoints and tokens",
		Long: "Profiles live in $HF_CONFIG_DIR/config.yaml, by default in the user's config\n" +
			"directory (hf/config.yaml), readable by the owner only.",
	})
	c.AddCommand(newProfileSetCmd(f), newProfileUseCmd(f), newProfileListCmd(f), newProfileDeleteCmd(f))
	return c
}

// profileSetOptions are the options of `profile set`.
type profileSetOptions struct {
	f        *Factory
	name     string
	endpoint string
	token    string
	caFile   string
	use      bool
}

// newProfileSetCmd reads the profile's own --endpoint and --token; they shadow
// the global flags of the same names, which make no sense here.
func newProfileSetCmd(f *Factory) *cobra.Command {
	opts := &profileSetOptions{f: f}
	c := &cobra.Command{
		Use:   "set NAME --endpoint URL [--token T] [--ca-file CA] [--use]",
		Short: "Create or change a profile",
		Args:  exactArgs(1, "one profile NAME"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.name = args[0]
			return runProfileSet(opts, flagSet(c.Flags(), "endpoint"), flagSet(c.Flags(), "token"))
		},
	}
	c.Flags().StringVar(&opts.endpoint, "endpoint", "", "API endpoint, e.g. http://10.0.0.5:7700")
	c.Flags().StringVar(&opts.token, "token", "", "bearer token")
	c.Flags().StringVar(&opts.caFile, "ca-file", "", "the cluster's CA certificate (a node's <data dir>/cluster/ca.crt), kept in the profile")
	c.Flags().BoolVar(&opts.use, "use", false, "make it the current profile")
	return c
}

func runProfileSet(opts *profileSetOptions, endpointSet, tokenSet bool) error {
	cfg, path, err := opts.f.loadConfig()
	if err != nil {
		return err
	}
	p, exists := cfg.Profiles[opts.name]
	if !exists {
		if !endpointSet {
			return usageErrorf("new profile %q needs --endpoint", opts.name)
		}
		p = &Profile{}
		cfg.Profiles[opts.name] = p
	}
	if endpointSet {
		if _, err := client.New(opts.endpoint, ""); err != nil {
			return usageErrorf("--endpoint: %v", err)
		}
		p.Endpoint = opts.endpoint
	}
	if tokenSet {
		p.Token = opts.token
	}
	if opts.caFile != "" {
		pem, err := readCA(opts.caFile)
		if err != nil {
			return usageErrorf("--ca-file: %v", err)
		}
		p.CA = string(pem)
	}
	// The first profile becomes current: there is nothing else to choose from.
	if opts.use || cfg.Current == "" {
		cfg.Current = opts.name
	}
	if err := saveConfig(path, cfg); err != nil {
		return err
	}
	fmt.Fprintf(opts.f.Out, "profile %q saved", opts.name)
	if cfg.Current == opts.name {
		fmt.Fprint(opts.f.Out, " (current)")
	}
	fmt.Fprintln(opts.f.Out)
	return nil
}

func newProfileUseCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "use NAME",
		Short: "Make a profile the current one",
		Args:  exactArgs(1, "one profile NAME"),
		RunE: func(_ *cobra.Command, args []string) error {
			cfg, path, err := f.loadConfig()
			if err != nil {
				return err
			}
			if _, ok := cfg.Profiles[args[0]]; !ok {
				return fmt.Errorf("profile %q not found in %s", args[0], path)
			}
			cfg.Current = args[0]
			if err := saveConfig(path, cfg); err != nil {
				return err
			}
			_, err = fmt.Fprintf(f.Out, "using profile %q\n", args[0])
			return err
		},
	}
}

// profileView is a profile as `profile list -o json|yaml` shows it: tokens are
// never printed.
type profileView struct {
	Name     string `json:"name"`
	Endpoint string `json:"endpoint"`
	HasToken bool   `json:"hasToken"`
	Current  bool   `json:"current"`
}

func newProfileListCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List profiles (tokens are not shown)",
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			cfg, _, err := f.loadConfig()
			if err != nil {
				return err
			}
			views := make([]profileView, 0, len(cfg.Profiles))
			rows := make([][]string, 0, len(cfg.Profiles))
			for _, name := range sortedKeys(cfg.Profiles) {
				p := cfg.Profiles[name]
				v := profileView{Name: name, Endpoint: p.Endpoint, HasToken: p.Token != "", Current: name == cfg.Current}
				views = append(views, v)
				cur, tok := "", "none"
				if v.Current {
					cur = "*"
				}
				if v.HasToken {
					tok = "set"
				}
				rows = append(rows, []string{cur, name, p.Endpoint, tok})
			}
			pr := f.printer()
			if pr.structured() {
				return pr.encode(map[string]any{"current": cfg.Current, "profiles": views})
			}
			return pr.table([]string{"CURRENT", "NAME", "ENDPOINT", "TOKEN"}, rows)
		},
	}
}

func newProfileDeleteCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME",
		Aliases: []string{"rm"},
		Short:   "Delete a profile",
		Args:    exactArgs(1, "one profile NAME"),
		RunE: func(_ *cobra.Command, args []string) error {
			cfg, path, err := f.loadConfig()
			if err != nil {
				return err
			}
			if _, ok := cfg.Profiles[args[0]]; !ok {
				return fmt.Errorf("profile %q not found in %s", args[0], path)
			}
			delete(cfg.Profiles, args[0])
			if cfg.Current == args[0] {
				cfg.Current = ""
			}
			if err := saveConfig(path, cfg); err != nil {
				return err
			}
			_, err = fmt.Fprintf(f.Out, "profile %q deleted\n", args[0])
			return err
		},
	}
}
