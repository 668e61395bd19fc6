package docker

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/docker/docker/client"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// Config is the docker driver's configuration (JSON, snake_case keys).
type Config struct {
	// Host is the engine address ("unix:///var/run/docker.sock",
	// "tcp://10.0.0.5:2376"); empty means DOCKER_HOST, else the local socket.
	// TLS settings come from DOCKER_TLS_VERIFY and DOCKER_CERT_PATH.
	Host string `json:"host"`
	// Network is the network containers join; created as a bridge network
	// labelled "<label_namespace>.network" when missing.
	Network string `json:"network"`
	// ImagesPath is the download cache for tarball images; empty means
	// "images" in the instance's data dir.
	ImagesPath string `json:"images_path"`
	// LabelNamespace prefixes every label the driver sets ("hf.node"). Nodes
	// sharing one engine see only containers of their own namespace, node name
	// and instance.
	LabelNamespace string `json:"label_namespace"`
	// AllowPrivileged lets templates ask for privileged containers.
	AllowPrivileged bool `json:"allow_privileged"`
	// User is who a container runs as when its template names no user:
	// "uid" or "uid:gid", numeric (a name could be root in the image).
	// Containers run without capabilities and cannot gain privileges
	// (no-new-privileges), so a machine's user is never root on the host.
	User string `json:"user"`
	// AllowRoot lets this node's user and templates' users be root (uid 0);
	// a root container keeps the engine's default capabilities.
	AllowRoot bool `json:"allow_root"`
	// PidsLimit bounds the processes of one container, so a fork bomb stays
	// inside its machine.
	PidsLimit int64 `json:"pids_limit"`
	// NetworkICC lets the containers on a network the driver makes reach
	// each other. Without it the driver makes the network with
	// inter-container traffic off, so one user's machine cannot reach
	// another's; a network made by someone else is used as it is.
	NetworkICC bool `json:"network_icc"`
	// NetworkPerUser puts the machine of a claim with a user on a network of
	// that user's own, "<network>-<user>", made (with inter-container
	// traffic on) when the user's first machine is made and removed with
	// the last: a user's machines reach each other, and no one else's reach
	// them. Machines without a user (a pool's warm ones) stay on Network.
	// Every network takes an address range from the engine's pools (its
	// default-address-pools; a default engine has room for about 30).
	NetworkPerUser bool `json:"network_per_user"`
	// StartTimeout bounds how long Allocate waits for a container to run.
	StartTimeout types.Duration `json:"start_timeout"`
	// StartGrace is how long a started container must keep running before
	// Allocate reports it, so one that exits at once fails the claim with its
	// exit code and log; 0 only checks that it was started.
	StartGrace types.Duration `json:"start_grace"`
	// StopTimeout is how long Deallocate waits after SIGTERM before SIGKILL.
	StopTimeout types.Duration `json:"stop_timeout"`
	// DownloadUser and DownloadPassword are sent (HTTP basic auth) when
	// tarball images are downloaded.
	DownloadUser     string `json:"download_user"`
	DownloadPassword string `json:"download_password"`
	drivers.Alter
}

// Defaults for absent keys.
const (
	DefaultNetwork        = "hf"
	DefaultLabelNamespace = "hf"
	DefaultStartTimeout   = 60 * time.Second
	DefaultStartGrace     = 200 * time.Millisecond
	DefaultStopTimeout    = 5 * time.Second
	// DefaultUser is nobody:nogroup.
	DefaultUser      = "65534:65534"
	DefaultPidsLimit = 4096
)

// DefaultConfig returns the configuration used for absent keys.
func DefaultConfig() Config {
	return Config{
		Network:        DefaultNetwork,
		LabelNamespace: DefaultLabelNamespace,
		StartTimeout:   types.D(DefaultStartTimeout),
		StartGrace:     types.D(DefaultStartGrace),
		StopTimeout:    types.D(DefaultStopTimeout),
		User:           DefaultUser,
		PidsLimit:      DefaultPidsLimit,
	}
}

// ParseConfig decodes cfg strictly over the defaults and validates it.
func ParseConfig(cfg []byte) (Config, error) {
	c := DefaultConfig()
	if err := drivers.DecodeConfig(cfg, &c); err != nil {
		return Config{}, err
	}
	return c, c.Validate()
}

var (
	// networkName is what the engine accepts as a network name.
	networkName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)
	// labelNamespace is a lower-case reverse-DNS-like label prefix.
	labelNamespace = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$`)
)

// Validate checks the configuration; the error names the key.
func (c Config) Validate() error {
	if c.Host != "" {
		if err := validateHost(c.Host); err != nil {
			return types.Invalid("host", "%s", err.Error())
		}
	}
	switch {
	case c.Network == "":
		return types.Invalid("network", "is required")
	case c.Network == "host" || c.Network == "none":
		return types.Invalid("network", "%q cannot publish ports; use a bridge network", c.Network)
	case !networkName.MatchString(c.Network):
		return types.Invalid("network", "%q is not a valid network name", c.Network)
	}
	if !labelNamespace.MatchString(c.LabelNamespace) {
		return types.Invalid("label_namespace", "%q: want lower-case letters, digits, dots and dashes", c.LabelNamespace)
	}
	if c.StartTimeout.Duration <= 0 {
		return types.Invalid("start_timeout", "must be positive")
	}
	if c.StartGrace.Duration < 0 {
		return types.Invalid("start_grace", "must not be negative")
	}
	if c.StartGrace.Duration >= c.StartTimeout.Duration {
		return types.Invalid("start_grace", "must be shorter than start_timeout (%s)", c.StartTimeout.Duration)
	}
	if c.StopTimeout.Duration < 0 {
		return types.Invalid("stop_timeout", "must not be negative")
	}
	if err := checkUser(c.User, c.AllowRoot); err != nil {
		return types.Invalid("user", "%s", err.Error())
	}
	if c.PidsLimit < 1 {
		return types.Invalid("pids_limit", "must be at least 1")
	}
	if c.DownloadPassword != "" && c.DownloadUser == "" {
		return types.Invalid("download_password", "needs download_user")
	}
	return c.Alter.Validate()
}

// userSpec is what the engine takes as a numeric user: "uid" or "uid:gid".
var userSpec = regexp.MustCompile(`^([0-9]{1,10})(:[0-9]{1,10})?$`)

// checkUser accepts a numeric user, root (uid 0) only when allowRoot.
func checkUser(user string, allowRoot bool) error {
	uid, _, err := parseUser(user)
	if err != nil {
		return err
	}
	if uid == 0 && !allowRoot {
		return fmt.Errorf("%q is root: not allowed on this node (allow_root is false)", user)
	}
	return nil
}

// parseUser splits a numeric "uid" or "uid:gid"; a uid alone has gid 0, as
// the engine gives a uid that the image's passwd does not list.
func parseUser(user string) (uid, gid uint32, err error) {
	m := userSpec.FindStringSubmatch(user)
	if m == nil {
		return 0, 0, fmt.Errorf("%q: want a numeric uid or uid:gid (a name could be root in the image)", user)
	}
	u, err := strconv.ParseUint(m[1], 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("%q: uid out of range", user)
	}
	var g uint64
	if m[2] != "" {
		if g, err = strconv.ParseUint(m[2][1:], 10, 32); err != nil {
			return 0, 0, fmt.Errorf("%q: gid out of range", user)
		}
	}
	return uint32(u), uint32(g), nil
}

// isRoot reports whether a checked user is uid 0.
func isRoot(user string) bool {
	uid, _, err := parseUser(user)
	return err == nil && uid == 0
}

// validateHost accepts what the engine client can dial.
func validateHost(host string) error {
	u, err := client.ParseHostURL(host)
	if err != nil {
		return fmt.Errorf("%q: %w", host, err)
	}
	switch u.Scheme {
	case "unix", "tcp", "http", "https":
		return nil
	}
	return fmt.Errorf("%q: scheme %q not supported (unix, tcp, http, https)", host, u.Scheme)
}

// resolveHost returns the engine address: host, else envHost (DOCKER_HOST),
// else the local socket.
func resolveHost(host, envHost string) string {
	switch {
	case host != "":
		return host
	case envHost != "":
		return envHost
	}
	return client.DefaultDockerHost
}
