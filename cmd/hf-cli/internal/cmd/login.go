package cmd

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/config"
)

// loginOptions are the options of `login`.
type loginOptions struct {
	f      *Factory
	name   string
	token  string
	caFile string
}

func newLoginCmd(f *Factory) *cobra.Command {
	opts := &loginOptions{f: f}
	c := &cobra.Command{
		Use:   "login [ENDPOINT] [--token T] [--ca-file CA] [--name PROFILE]",
		Short: "Sign in to a cluster and keep it as the current profile",
		Long: "Checks the endpoint (default: the API of the node on this host, which it writes to\n" +
			"<data dir>/" + config.APIURLFile + " when it starts, else " + DefaultEndpoint + ") with the token and saves both, with\n" +
			"the cluster CA, as a profile that becomes the current one. For a node on this\n" +
			"host the token and the CA are read from its data dir; elsewhere give --ca-file\n" +
			"(a node's <data dir>/cluster/ca.crt) and --token, or type the token when asked.",
		Example: "  hf-cli login\n" +
			"  hf-cli login https://10.0.0.5:7700 --ca-file ca.crt --name lab",
		Args: maxArgs(1, "one ENDPOINT"),
		RunE: func(c *cobra.Command, args []string) error {
			endpoint := f.defaultEndpoint()
			if len(args) == 1 {
				endpoint = args[0]
			}
			return runLogin(c.Context(), opts, endpoint)
		},
	}
	c.Flags().StringVar(&opts.name, "name", "default", "the profile's name")
	c.Flags().StringVar(&opts.token, "token", "", "bearer token (default: HF_TOKEN, a local node's, else asked on the terminal)")
	c.Flags().StringVar(&opts.caFile, "ca-file", "", "the cluster's CA certificate (default: HF_CA_FILE, a local node's, else the system's)")
	return c
}

func runLogin(ctx context.Context, opts *loginOptions, endpoint string) error {
	f := opts.f
	// The endpoint, token and CA of this command, then the environment and
	// the local node for what they leave empty; never a saved profile.
	f.endpoint, f.token, f.caFile, f.profile = endpoint, cmp.Or(opts.token, f.token), cmp.Or(opts.caFile, f.caFile), ""
	f.noProfile = true
	if f.token == "" && f.Getenv("HF_TOKEN") == "" && !(f.LocalToken != nil && isLoopback(endpoint) && localTokenOK(f)) {
		fmt.Fprint(f.Err, "token: ")
		line, err := bufio.NewReader(f.In).ReadString('\n')
		if strings.TrimSpace(line) == "" {
			local := fmt.Sprintf("which is not in %s (HF_DATA_DIR names a node's other data dir)", filepath.Join(localDataDir(), "admin.token"))
			if !isLoopback(endpoint) {
				local = fmt.Sprintf("which is not sent to %s: not an address of this host's loopback", endpoint)
			}
			return usageErrorf("login needs a token: --token, HF_TOKEN, typed in, or for an endpoint on this host its node's admin token, %s: %v", local, err)
		}
		f.token = strings.TrimSpace(line)
	}
	cl, err := f.Client()
	if err != nil {
		return err
	}
	rctx, cancel := f.requestContext(ctx)
	defer cancel()
	who, err := cl.WhoAmI(rctx)
	if err != nil {
		if strings.Contains(err.Error(), "certificate") {
			return fmt.Errorf("%w (give the cluster's CA with --ca-file: a node's <data dir>/cluster/ca.crt)", err)
		}
		return err
	}
	cfg, path, err := f.loadConfig()
	if err != nil {
		return err
	}
	cfg.Profiles[opts.name] = &Profile{Endpoint: endpoint, Token: f.tokenUsed, CA: string(f.caPEM)}
	cfg.Current = opts.name
	if err := saveConfig(path, cfg); err != nil {
		return err
	}
	_, err = fmt.Fprintf(f.Out, "logged in to %s as %v (role %v); profile %q is current\n", endpoint, who["user"], who["role"], opts.name)
	return err
}

func localTokenOK(f *Factory) bool {
	tok, err := f.LocalToken()
	return err == nil && tok != ""
}
