// Package cmd holds hf-cli's commands. Each command has an options struct, a
// constructor that binds flags to it and a run function; Main builds the tree,
// runs it and maps the error to an exit code.
package cmd

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/config"
)

// DefaultEndpoint is used when no flag, environment variable or profile names one.
const DefaultEndpoint = "https://127.0.0.1:7700"

// Output formats.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
)

// Env is everything hf-cli takes from its process besides the arguments, so
// tests can run commands in-process.
type Env struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
	// OutIsTerminal selects aligned tables for people over tab-separated lines.
	OutIsTerminal bool
	Getenv        func(string) string
	UserConfigDir func() (string, error)
	Now           func() time.Time
	// Rand is the source of generated names and keys.
	Rand io.Reader
	// HTTPClient sends API requests (nil: a default client).
	HTTPClient *http.Client
	Version    string
	// LocalToken reads the admin token a node on this host keeps in its
	// data dir (nil: none); hf-cli uses it for a loopback endpoint when no
	// token is given.
	LocalToken func() (string, error)
	// LocalCA reads the cluster CA a node on this host keeps in its data
	// dir (nil: none), trusted for a loopback endpoint when no CA is given.
	LocalCA func() ([]byte, error)
	// LocalEndpoint reads the API URL a node on this host wrote to its data
	// dir when it started (nil: none): the endpoint when nothing names one.
	LocalEndpoint func() (string, error)
}

// OSEnv is the Env of a real process.
func OSEnv(version string) Env {
	return Env{
		In:            os.Stdin,
		Out:           os.Stdout,
		Err:           os.Stderr,
		OutIsTerminal: isatty.IsTerminal(os.Stdout.Fd()) || isatty.IsCygwinTerminal(os.Stdout.Fd()),
		Getenv:        os.Getenv,
		UserConfigDir: os.UserConfigDir,
		Now:           time.Now,
		Rand:          rand.Reader,
		HTTPClient:    &http.Client{Transport: keepAliveTransport()},
		Version:       version,
		LocalToken:    localToken,
		LocalCA:       localCA,
		LocalEndpoint: localEndpoint,
	}
}

// Main runs hf-cli with args and returns the process exit code.
func Main(ctx context.Context, env Env, args []string) int {
	root := NewRootCmd(env)
	if args == nil {
		args = []string{}
	}
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err != nil {
		printError(env.Err, err)
	}
	return ExitCode(err)
}

// Factory carries the environment and the global flags to every command and
// builds the API client from them.
type Factory struct {
	Env

	endpoint string
	token    string
	profile  string
	output   string
	caFile   string
	timeout  time.Duration
	// noProfile: Client takes nothing from a saved profile (login, which
	// makes one: a profile of a cluster since re-created on this host
	// held the old token and CA, and login failed on them).
	noProfile bool

	client *client.Client
	// tokenUsed is the token Client settled on, for clientFor; caPEM the
	// CA it trusts (nil: the system's).
	tokenUsed string
	caPEM     []byte
}

// NewRootCmd builds the whole command tree.
func NewRootCmd(env Env) *cobra.Command {
	f := &Factory{Env: env}
	root := groupCmd(&cobra.Command{
		Use:   "hf-cli",
		Short: "Administer an hf fleet through its REST API",
		Long: "hf-cli talks to an hf-node's REST API.\n\n" +
			"The endpoint, token and CA come from flags, then HF_ENDPOINT / HF_TOKEN /\n" +
			"HF_CA_FILE, then the profile (HF_PROFILE or the current one; see `hf-cli\n" +
			"profile`); a profile named by --profile counts as flags.\n" +
			"Exit codes: 1 error, 2 usage, 3 not found, 4 unauthorized/forbidden,\n" +
			"5 conflict, 6 timeout or claim failed; `machine shell` exits with the shell's\n" +
			"own status once it runs (255: the status did not come).",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			return f.resolveOutput()
		},
	})
	root.SetIn(env.In)
	root.SetOut(env.Out)
	root.SetErr(env.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })

	pf := root.PersistentFlags()
	pf.StringVar(&f.endpoint, "endpoint", "", "API endpoint (default: HF_ENDPOINT, the profile's, else the node's on this host (its data dir's "+config.APIURLFile+"), else "+DefaultEndpoint+")")
	pf.StringVar(&f.token, "token", "", "bearer token (default: HF_TOKEN, else the profile's)")
	pf.StringVar(&f.profile, "profile", "", "profile to use (default: HF_PROFILE, else the current profile)")
	pf.StringVarP(&f.output, "output", "o", "", "output format: table, json or yaml (default: HF_OUTPUT, else table)")
	pf.StringVar(&f.caFile, "ca-file", "", "CA certificate the endpoint's TLS certificate is checked against (default: HF_CA_FILE, else the profile's and, for an endpoint on this host, its node's, else the system's)")
	pf.DurationVar(&f.timeout, "timeout", 30*time.Second, "time limit of each API request, and of opening a watch stream (0: none)")

	root.AddCommand(
		newProfileCmd(f),
		newVersionCmd(f),
		newClusterCmd(f),
		newWhoAmICmd(f),
		newAuditCmd(f),
		newDescribeCmd(f),
		newLoginCmd(f),
		newPoolCmd(f),
		newBenchCmd(f),
		newFileCmd(f, fileCreate),
		newFileCmd(f, fileApply),
		newFileCmd(f, fileDelete),
	)
	for _, r := range allResources() {
		root.AddCommand(newResourceCmd(f, r))
	}
	// cobra's completion command, made here rather than by Execute, so that
	// an unknown shell is a usage error like any unknown command (cobra's
	// printed the help and exited 0).
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			groupCmd(c)
		}
	}
	return root
}

// resolveOutput applies flag > HF_OUTPUT > table and checks the value.
func (f *Factory) resolveOutput() error {
	if f.output == "" {
		f.output = f.Getenv("HF_OUTPUT")
	}
	switch f.output {
	case "":
		f.output = formatTable
	case formatTable, formatJSON, formatYAML:
	default:
		return usageErrorf("output format %q: want table, json or yaml", f.output)
	}
	return nil
}

// Client returns the API client for the resolved endpoint and token: flag, then
// environment, then profile.
func (f *Factory) Client() (*client.Client, error) {
	if f.client != nil {
		return f.client, nil
	}
	prof := &Profile{}
	if !f.noProfile {
		// With --endpoint and --token both given the profile still lends
		// its CA (an endpoint named by flag is most often another node of
		// the profile's cluster); a profile that cannot be read then is no
		// error, but one named that does not exist is (a mistake in the
		// command line, as a bad flag is).
		p, err := f.activeProfile()
		var usage *usageError
		switch {
		case err != nil && (f.endpoint == "" || f.token == "" || errors.As(err, &usage)):
			return nil, err
		case err == nil && p != nil:
			prof = p
		}
	}
	// A profile named by --profile is a flag too, so it beats HF_ENDPOINT,
	// HF_TOKEN and HF_CA_FILE; one picked by HF_PROFILE or as the current
	// one does not.
	pick := func(flag, env, fromProfile string) string {
		switch {
		case flag != "":
			return flag
		case f.profile != "" && fromProfile != "":
			return fromProfile
		case env != "":
			return env
		}
		return fromProfile
	}
	endpoint := pick(f.endpoint, f.Getenv("HF_ENDPOINT"), prof.Endpoint)
	f.tokenUsed = pick(f.token, f.Getenv("HF_TOKEN"), prof.Token)
	if endpoint == "" {
		endpoint = f.defaultEndpoint()
	}
	switch file := cmp.Or(f.caFile, f.Getenv("HF_CA_FILE")); {
	case f.caFile == "" && f.profile != "" && prof.CA != "":
		// As above: --profile's CA beats HF_CA_FILE.
		f.caPEM = trustedCAs(prof.CA, f.LocalCA, endpoint)
	case file != "":
		pem, err := readCA(file)
		if err != nil {
			return nil, usageErrorf("CA file: %v", err)
		}
		f.caPEM = pem
	default:
		f.caPEM = trustedCAs(prof.CA, f.LocalCA, endpoint)
	}
	if f.tokenUsed == "" && f.LocalToken != nil && isLoopback(endpoint) {
		// A node on this very host: its token is in its data dir, which
		// this user can read if it is theirs (root's is root's).
		if tok, err := f.LocalToken(); err == nil {
			f.tokenUsed = tok
		}
	}
	c, err := f.clientFor(endpoint)
	if err != nil {
		return nil, err
	}
	f.client = c
	return c, nil
}

// clientFor is a client of endpoint with the token and options of the main
// one (call Client first).
func (f *Factory) clientFor(endpoint string) (*client.Client, error) {
	opts := []client.Option{client.WithUserAgent("hf-cli/" + f.Version),
		// A warning comes with an object the server accepted, such as an
		// event created over capacity with --capacity-check warn.
		client.WithWarningHandler(func(text string) { fmt.Fprintf(f.Err, "warning: %s\n", text) })}
	if hc := f.httpClient(); hc != nil {
		opts = append(opts, client.WithHTTPClient(hc))
	}
	c, err := client.New(endpoint, f.tokenUsed, opts...)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return c, nil
}

// activeProfile returns the selected profile (--profile, HF_PROFILE, current),
// nil when none is selected. Naming a profile that does not exist is an error.
func (f *Factory) activeProfile() (*Profile, error) {
	name, explicit, from := f.profile, true, "--profile"
	if name == "" {
		name, from = f.Getenv("HF_PROFILE"), "HF_PROFILE"
	}
	cfg, path, err := f.loadConfig()
	if err != nil {
		return nil, err
	}
	if name == "" {
		name, explicit = cfg.Current, false
	}
	if name == "" {
		return nil, nil
	}
	p, ok := cfg.Profiles[name]
	if !ok {
		if explicit {
			// A mistake in the command line, as a bad flag is (it exited 1).
			return nil, usageErrorf("%s: profile %q not found in %s (hf-cli profile list shows them)", from, name, path)
		}
		return nil, fmt.Errorf("current profile %q not found in %s (run `hf-cli profile use NAME`)", name, path)
	}
	return p, nil
}

// requestContext bounds one API exchange by --timeout.
func (f *Factory) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if f.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, f.timeout)
}

// openWatch opens a watch stream whose opening (connecting, TLS, the
// answer's headers) --timeout bounds as it does any request; the stream
// then runs until ctx ends.
func (f *Factory) openWatch(ctx context.Context, c *client.Client, opts client.WatchOptions) (<-chan client.WatchEvent, error) {
	if f.timeout <= 0 {
		return c.WatchWith(ctx, opts)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(f.timeout, func() {
		cancel(fmt.Errorf("%w: no answer within %s to open the watch stream", context.DeadlineExceeded, f.timeout))
	})
	events, err := c.WatchWith(wctx, opts)
	if !timer.Stop() {
		return nil, context.Cause(wctx)
	}
	return events, err
}

// printer returns the output printer for the resolved format.
func (f *Factory) printer() *printer {
	return &printer{out: f.Out, format: f.output, terminal: f.OutIsTerminal, now: f.Now}
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *pflag.FlagSet, name string) bool {
	fl := fs.Lookup(name)
	return fl != nil && fl.Changed
}

// keepAliveTransport is the default transport with room to keep a
// connection per request in flight (the default keeps 2 per host, so a
// bench of 64 in flight shook hands with TLS on most requests).
func keepAliveTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, keptPerHost
	return tr
}

// keptPerHost is how many idle connections to one endpoint the CLI keeps.
const keptPerHost = 256

// httpClient is HTTPClient, trusting the resolved CA when there is one.
func (f *Factory) httpClient() *http.Client {
	if f.caPEM == nil {
		return f.HTTPClient
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(f.caPEM)
	base := http.DefaultTransport
	if f.HTTPClient != nil && f.HTTPClient.Transport != nil {
		base = f.HTTPClient.Transport
	}
	tr, ok := base.(*http.Transport)
	if !ok {
		return f.HTTPClient
	}
	tr = tr.Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	hc := &http.Client{Transport: tr}
	if f.HTTPClient != nil {
		hc.Timeout = f.HTTPClient.Timeout
	}
	return hc
}

// trustedCAs is what an endpoint's certificate is checked against when no
// CA file is given: the profile's CA and, for an endpoint on this host, the
// CA of the node here, both (the endpoint may be either's: a node of the
// profile's cluster, or this host's own node while the profile is of
// another cluster); nil for the system's.
func trustedCAs(profileCA string, local func() ([]byte, error), endpoint string) []byte {
	var pems [][]byte
	if profileCA != "" {
		pems = append(pems, []byte(profileCA))
	}
	if local != nil && isLoopback(endpoint) {
		if pem, err := local(); err == nil && len(pem) > 0 {
			pems = append(pems, pem)
		}
	}
	if len(pems) == 0 {
		return nil
	}
	return bytes.Join(pems, []byte("\n"))
}

// readCA reads a PEM CA certificate file.
func readCA(path string) ([]byte, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pem, nil
}

// localCA reads <data dir>/cluster/ca.crt of a node run by this user with
// the default data dir (HF_DATA_DIR when set).
func localCA() ([]byte, error) {
	return os.ReadFile(filepath.Join(localDataDir(), "cluster", "ca.crt"))
}

func localDataDir() string {
	if dir := os.Getenv("HF_DATA_DIR"); dir != "" {
		return dir
	}
	return config.DefaultDataDir(os.Geteuid(), os.Getenv)
}

// localEndpoint reads the API URL of a node run by this user with the
// default data dir (HF_DATA_DIR when set).
func localEndpoint() (string, error) {
	b, err := os.ReadFile(filepath.Join(localDataDir(), config.APIURLFile))
	return string(b), err
}

// defaultEndpoint is the endpoint when no flag, environment variable or
// profile names one: the API of the node on this host when its data dir
// says where that is (a loopback https or http URL), else DefaultEndpoint.
func (f *Factory) defaultEndpoint() string {
	if f.LocalEndpoint == nil {
		return DefaultEndpoint
	}
	ep, err := f.LocalEndpoint()
	if err != nil {
		return DefaultEndpoint
	}
	ep = strings.TrimSpace(ep)
	if u, err := url.Parse(ep); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Path != "" || !isLoopback(ep) {
		return DefaultEndpoint
	}
	return ep
}

// localToken reads <data dir>/admin.token of a node run by this user with
// the default data dir (HF_DATA_DIR when set).
func localToken() (string, error) {
	b, err := os.ReadFile(filepath.Join(localDataDir(), "admin.token"))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// isLoopback reports whether endpoint's host is this host's loopback.
func isLoopback(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	switch h := u.Hostname(); h {
	case "localhost":
		return true
	default:
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
}
