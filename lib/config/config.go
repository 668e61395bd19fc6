package config

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hf-fleet/hf/lib/scheduler"
)

// Config is hf-node's whole configuration. The mapstructure (and yaml) tags are
// the config keys; every key is snake_case.
type Config struct {
	// Name is the node's name in the cluster, a DNS label. Empty means the node
	// generates one on first start and keeps it in the data dir, so a restarted
	// node rejoins as the same member.
	Name string `mapstructure:"name" yaml:"name"`
	// DataDir holds the store, the node's identity and driver state. Empty in a
	// file or the environment means the default: /var/lib/hf as root, else
	// $XDG_DATA_HOME/hf or ~/.local/share/hf.
	DataDir string `mapstructure:"data_dir" yaml:"data_dir"`
	// Labels are this node's labels, matched by environments' node selectors.
	Labels map[string]string `mapstructure:"labels" yaml:"labels,omitempty"`
	// MemoryLimitMB is the node's memory budget in MiB: seven eighths of it
	// are a soft limit of the Go runtime (it collects garbage harder as the
	// heap nears it; the rest is for the store's memory-mapped tables), and
	// the store's caches are sized from it. It bounds what the node keeps
	// beside its objects, not the objects themselves. 0: no limit (Go's
	// default, or GOMEMLIMIT). Default: 0.
	MemoryLimitMB int `mapstructure:"memory_limit_mb" yaml:"memory_limit_mb"`
	// Log configures the daemon's own logging.
	Log LogConfig `mapstructure:"log" yaml:"log"`
	// API configures the REST API and its tokens.
	API APIConfig `mapstructure:"api" yaml:"api"`
	// Cluster configures gossip membership and replication.
	Cluster ClusterConfig `mapstructure:"cluster" yaml:"cluster"`
	// Scheduler configures how claims are placed and bound.
	Scheduler SchedulerConfig `mapstructure:"scheduler" yaml:"scheduler"`
	// Store configures the local object store.
	Store StoreConfig `mapstructure:"store" yaml:"store"`
	// Debug configures what helps to find out why a node is slow.
	Debug DebugConfig `mapstructure:"debug" yaml:"debug"`
	// Drivers are the driver instances this node runs. None configured (no
	// key, or an empty list) loads as [{name: test}] with DefaultDrivers set.
	Drivers []DriverConfig `mapstructure:"drivers" yaml:"drivers"`
	// DefaultDrivers is true when no drivers were configured, so the node may
	// add what the host offers (native, docker if an engine answers). Not a
	// config key.
	DefaultDrivers bool `mapstructure:"-" yaml:"-"`
	// IgnoredEnv are the variables under the prefix of a section's that
	// Load ignored as another tool's (see IgnoredVar), for hf-node to warn
	// of. Not a config key.
	IgnoredEnv []IgnoredVar `mapstructure:"-" yaml:"-"`
}

// LogConfig configures logging.
type LogConfig struct {
	// Level is debug, info, warn or error. Default: info.
	Level string `mapstructure:"level" yaml:"level"`
	// Format is text or json. Default: text.
	Format string `mapstructure:"format" yaml:"format"`
}

// Log levels and formats.
const (
	LogDebug = "debug"
	LogInfo  = "info"
	LogWarn  = "warn"
	LogError = "error"

	LogText = "text"
	LogJSON = "json"
)

// SlogLevel returns Level as a slog.Level; anything unknown is Info.
func (l LogConfig) SlogLevel() slog.Level {
	switch l.Level {
	case LogDebug:
		return slog.LevelDebug
	case LogWarn:
		return slog.LevelWarn
	case LogError:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// APIConfig configures the REST API.
type APIConfig struct {
	// Address is the host:port the API listens on. An empty host listens on every
	// interface; port 0 picks a free port. Default: 127.0.0.1:7700.
	Address string `mapstructure:"address" yaml:"address"`
	// AdminToken is a bearer token with the admin role (at least 16 characters).
	// Empty means the node generates one on first start, prints it once and keeps
	// it in the data dir. Also read from HF_ADMIN_TOKEN.
	AdminToken string `mapstructure:"admin_token" yaml:"admin_token"`
	// Tokens are further static bearer tokens.
	Tokens []TokenConfig `mapstructure:"tokens" yaml:"tokens"`
	// MaxClaimsPerUser caps the live (Requested or Bound) claims of one user
	// of role user; 0 is no cap. Default: 100.
	MaxClaimsPerUser int `mapstructure:"max_claims_per_user" yaml:"max_claims_per_user"`
	// MaxStreamsPerToken caps the event streams one token holds open at
	// once on a node. Default: 16.
	MaxStreamsPerToken int `mapstructure:"max_streams_per_token" yaml:"max_streams_per_token"`
	// UserWritesPerSecond is how fast one user of role user may write
	// through a node (bursts of five seconds' worth); 0 is no limit.
	// Default: 20.
	UserWritesPerSecond float64 `mapstructure:"user_writes_per_second" yaml:"user_writes_per_second"`
	// PlainHTTP serves the API without TLS; allowed only on a loopback
	// address. Default: false (TLS with the node's certificate from the
	// cluster CA).
	PlainHTTP bool `mapstructure:"plain_http" yaml:"plain_http"`
	// TLSHosts are further names and addresses for the node's API
	// certificate (a load balancer's, say): DNS names, "*.example.com"
	// included, or IP addresses. Default: none.
	TLSHosts []string `mapstructure:"tls_hosts" yaml:"tls_hosts"`
	// CORSOrigins are the origins (scheme://host[:port]) whose pages may
	// call the API from a browser; "*" allows any. The dashboard a node
	// serves is same-origin and needs none. Default: none.
	CORSOrigins []string `mapstructure:"cors_origins" yaml:"cors_origins"`
	// ResumeWindow is how far before its Last-Event-ID an event stream
	// resumed (on any node) replays, to take in changes that reached the
	// node later than the one the client left. Default: 1m.
	ResumeWindow time.Duration `mapstructure:"resume_window" yaml:"resume_window"`
	// ShellKeepalive is how often a machine shell's connection is checked
	// while the shell is quiet: an empty frame goes to its client
	// (hf-shell.v2), and the kernel is asked whether the client is still
	// there. A client gone is noticed within about two of these, and its
	// shell hung up. Default: 10s; MinShellKeepalive to MaxShellKeepalive.
	ShellKeepalive time.Duration `mapstructure:"shell_keepalive" yaml:"shell_keepalive"`
}

// Role is what a token may do.
type Role string

// Token roles.
const (
	// RoleAdmin may do everything.
	RoleAdmin Role = "admin"
	// RoleOperator runs the fleet: every kind but users and tokens.
	RoleOperator Role = "operator"
	// RoleUser sees only its own claims and sessions and claims what its access
	// codes allow.
	RoleUser Role = "user"
)

// TokenConfig is one static API token.
type TokenConfig struct {
	// Name identifies the token in logs and audit events (a DNS label).
	Name string `mapstructure:"name" yaml:"name"`
	// Token is the bearer secret, at least 16 characters.
	Token string `mapstructure:"token" yaml:"token"`
	// Role is admin, operator or user.
	Role Role `mapstructure:"role" yaml:"role"`
	// User is the user the token acts as; empty means Name.
	User string `mapstructure:"user" yaml:"user,omitempty"`
}

// UserName returns User, or Name when User is empty.
func (t TokenConfig) UserName() string {
	if t.User != "" {
		return t.User
	}
	return t.Name
}

// ClusterConfig configures membership (hashicorp/memberlist) and replication.
type ClusterConfig struct {
	// Bind is the gossip host:port (TCP and UDP). Default: 127.0.0.1:7701.
	Bind string `mapstructure:"bind" yaml:"bind"`
	// Advertise is the host:port other nodes reach this one at, when it differs
	// from Bind (NAT, 0.0.0.0). Empty means derived from Bind.
	Advertise string `mapstructure:"advertise" yaml:"advertise"`
	// Join lists addresses (host or host:port; the port defaults to this node's
	// gossip port) of any members of the cluster to join at start and rejoin
	// periodically. Empty starts a new cluster (or waits for others to join).
	Join []string `mapstructure:"join" yaml:"join"`
	// JoinToken lets a node that joins fetch the cluster's secrets (its CA
	// and gossip keys) once, from the member the token names; `hf-cli cluster
	// join-token` prints one. Used only while the data dir holds none.
	JoinToken string `mapstructure:"join_token" yaml:"join_token"`
	// Key encrypts gossip: base64 of 16, 24 or 32 bytes (AES-128/192/256). Every
	// member needs the same key. Empty means the cluster's own: the first node
	// makes one, joining nodes receive it with their join token.
	Key string `mapstructure:"key" yaml:"key"`
	// Label is stamped on every gossip packet; members with a different label are
	// ignored, which keeps two clusters on one network apart. At most 255 bytes.
	Label string `mapstructure:"label" yaml:"label"`
	// Profile is local, lan or wan: the failure-detection timings used for every
	// timing below that is zero. Default: lan.
	Profile Profile `mapstructure:"profile" yaml:"profile"`
	// GossipInterval is how often queued broadcasts are gossiped.
	GossipInterval time.Duration `mapstructure:"gossip_interval" yaml:"gossip_interval"`
	// ProbeInterval is how often a random member is probed for liveness.
	ProbeInterval time.Duration `mapstructure:"probe_interval" yaml:"probe_interval"`
	// ProbeTimeout is how long a probe waits for an ack; less than ProbeInterval.
	ProbeTimeout time.Duration `mapstructure:"probe_timeout" yaml:"probe_timeout"`
	// SuspicionMult scales how long a suspected member has to refute before it is
	// declared dead.
	SuspicionMult int `mapstructure:"suspicion_mult" yaml:"suspicion_mult"`
	// RejoinInterval is how often the Join addresses and known peers are joined
	// again so that partitions heal. Default: 10s.
	RejoinInterval time.Duration `mapstructure:"rejoin_interval" yaml:"rejoin_interval"`
	// AntiEntropyInterval is how often a node exchanges digests with a peer to
	// repair what gossip missed. Default: 30s.
	AntiEntropyInterval time.Duration `mapstructure:"anti_entropy_interval" yaml:"anti_entropy_interval"`
	// Fanout is how many peers a write is sent to by its writer and by each
	// node that relays it (a tree over the live members rooted at the
	// writer), so a write costs each node at most Fanout sends whatever the
	// cluster's size; -1 sends every write from its writer to every peer.
	// Default: 3 (see README "Scale": 200 members, p99 147-165 ms to all,
	// 3 sends per write per node).
	Fanout int `mapstructure:"fanout" yaml:"fanout"`
}

// KeyBytes decodes Key; nil when Key is empty.
func (c ClusterConfig) KeyBytes() ([]byte, error) {
	if c.Key == "" {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(c.Key)
	if err != nil {
		return nil, fmt.Errorf("decode cluster key: %w", err)
	}
	switch len(b) {
	case 16, 24, 32:
		return b, nil
	}
	return nil, fmt.Errorf("cluster key is %d bytes, want 16, 24 or 32", len(b))
}

// Placement is how the scheduler ranks nodes that fit a claim.
type Placement string

// Placements.
const (
	// PlacementPack prefers the node with the least free capacity left, keeping
	// other nodes empty.
	PlacementPack Placement = "pack"
	// PlacementSpread prefers the node with the most free capacity.
	PlacementSpread Placement = "spread"
)

// SchedulerConfig configures claim placement and binding.
type SchedulerConfig struct {
	// Placement is pack or spread. Default: pack.
	Placement Placement `mapstructure:"placement" yaml:"placement"`
	// BindTimeout is how long a claim may wait for capacity before it fails with a
	// reason. Default: 5m.
	BindTimeout time.Duration `mapstructure:"bind_timeout" yaml:"bind_timeout"`
	// OfferTimeout is how long an elector waits for a candidate's accept or
	// decline before it offers the claim to the next candidate. Default: 2s.
	OfferTimeout time.Duration `mapstructure:"offer_timeout" yaml:"offer_timeout"`
	// LostGrace is how long a dead node's machines are kept before they are marked
	// lost and their claims re-bound or failed. Default: 30s.
	LostGrace time.Duration `mapstructure:"lost_grace" yaml:"lost_grace"`
	// PoolMaxIdle reaps a machine set's claimed machine with no activity (a
	// session keepalive, or use seen by its driver) for this long, when the set
	// does not say; 0 turns idle reaping off for such sets. Default: 0.
	PoolMaxIdle time.Duration `mapstructure:"pool_max_idle" yaml:"pool_max_idle"`
	// PoolMaxAssigned reaps a set's machine claimed longer than this, when the
	// set does not say. Default: 8h.
	PoolMaxAssigned time.Duration `mapstructure:"pool_max_assigned" yaml:"pool_max_assigned"`
	// PoolMaxAge reaps a set's unclaimed machine older than this (a stale image),
	// when the set does not say. Default: 24h.
	PoolMaxAge time.Duration `mapstructure:"pool_max_age" yaml:"pool_max_age"`
	// ActivityResolution is how stale a machine's recorded last activity may
	// get before its node writes a newer one: finer costs a replicated write
	// per busy machine that often. Default: 1m.
	ActivityResolution time.Duration `mapstructure:"activity_resolution" yaml:"activity_resolution"`
	// MinCPU and MinRAMGB are the least a machine counts for, whatever its
	// template says (a template of cpu 0 would pack without end). Default:
	// 0.05 and 0.05.
	MinCPU   float64 `mapstructure:"min_cpu" yaml:"min_cpu"`
	MinRAMGB float64 `mapstructure:"min_ram_gb" yaml:"min_ram_gb"`
	// MaxRebinds is how many times a claim whose machine died (an entry that
	// exits at once, a node lost) is bound again before it fails with the
	// reason; 0 is no cap. Default: 5.
	MaxRebinds int `mapstructure:"max_rebinds" yaml:"max_rebinds"`
	// MaxRefusedPasses fails a claim that every node that fits declined or
	// gave back (its allocation failed: an image no engine has) in this many
	// passes over the nodes in a row, over a minute at least, rather than
	// wait for its bind timeout; 0 waits for the bind timeout. Default: 3.
	MaxRefusedPasses int `mapstructure:"max_refused_passes" yaml:"max_refused_passes"`
}

// DebugConfig configures the node's debug endpoints.
type DebugConfig struct {
	// PprofAddress, when set, serves Go's profiles (/debug/pprof/) on this
	// loopback host:port, without a token. Default: "" (off).
	PprofAddress string `mapstructure:"pprof_address" yaml:"pprof_address"`
}

// StoreConfig configures the local object store.
type StoreConfig struct {
	// GCInterval is how often value-log GC and tombstone collection run. Default: 5m.
	GCInterval time.Duration `mapstructure:"gc_interval" yaml:"gc_interval"`
	// TombstoneTTL is how long a delete is remembered so that every node sees it;
	// longer than any partition you expect to heal. Default: 24h.
	TombstoneTTL time.Duration `mapstructure:"tombstone_ttl" yaml:"tombstone_ttl"`
	// TombstoneMinAge is how old a tombstone must be before it is collected
	// ahead of TombstoneTTL, once anti-entropy has shown that every node
	// (those down but not yet forgotten included) holds it; at least
	// api.resume_window, so a resumed event stream still replays the deletes
	// it asks for. Equal to TombstoneTTL: only the TTL collects. Default: 10m.
	TombstoneMinAge time.Duration `mapstructure:"tombstone_min_age" yaml:"tombstone_min_age"`
	// SyncWrites fsyncs every write before it is acknowledged. Without it a
	// crash of the process loses nothing, but a power cut may lose the last
	// writes, which peers repair by anti-entropy; a node without peers that
	// must survive power cuts turns it on (~2 ms a write). Default: false.
	SyncWrites bool `mapstructure:"sync_writes" yaml:"sync_writes"`
}

// DriverConfig is one driver instance.
type DriverConfig struct {
	// Name is the driver type: test, native, docker, aws.
	Name string `mapstructure:"name" yaml:"name"`
	// Instance tells two instances of one type apart ("docker/gpu"); DNS labels
	// joined by '/'. Empty means Name.
	Instance string `mapstructure:"instance" yaml:"instance,omitempty"`
	// Config is the driver's own configuration, opaque here; the driver gets it
	// as JSON (ConfigJSON) and validates it in Prepare.
	Config map[string]any `mapstructure:"config" yaml:"config,omitempty"`
}

// InstanceName returns Instance, or Name when Instance is empty.
func (d DriverConfig) InstanceName() string {
	if d.Instance != "" {
		return d.Instance
	}
	return d.Name
}

// ConfigJSON returns Config as a JSON object ("{}" when there is none), the form
// drivers.Driver.Prepare takes.
func (d DriverConfig) ConfigJSON() ([]byte, error) {
	if d.Config == nil {
		return []byte("{}"), nil
	}
	b, err := json.Marshal(d.Config)
	if err != nil {
		return nil, fmt.Errorf("driver %s config: %w", d.InstanceName(), err)
	}
	return b, nil
}

// Default values, exported so that the cmd and the docs can show them.
const (
	DefaultAPIAddress          = "127.0.0.1:7700"
	DefaultGossipAddress       = "127.0.0.1:7701"
	DefaultProfile             = ProfileLAN
	DefaultRejoinInterval      = 10 * time.Second
	DefaultAntiEntropyInterval = 30 * time.Second
	DefaultFanout              = 3
	DefaultPlacement           = PlacementPack
	DefaultBindTimeout         = 5 * time.Minute
	DefaultOfferTimeout        = 2 * time.Second
	DefaultLostGrace           = 30 * time.Second
	DefaultResumeWindow        = time.Minute
	DefaultShellKeepalive      = 10 * time.Second
	DefaultPoolMaxAssigned     = 8 * time.Hour
	DefaultPoolMaxAge          = 24 * time.Hour
	DefaultActivityResolution  = time.Minute
	DefaultGCInterval          = 5 * time.Minute
	DefaultTombstoneTTL        = 24 * time.Hour
	DefaultTombstoneMinAge     = 10 * time.Minute
	DefaultDriver              = "test"
)

// MaxShellKeepalive is the longest api.shell_keepalive. A client gone is
// noticed within about two intervals, so a longer one leaves a shell whose
// client was killed running (and what it started) for over ten minutes;
// and NATs and load balancers commonly drop a connection idle for about
// five minutes (AWS's for 350 s), which the keep-alive is also there to
// prevent. (Linux refuses a TCP keep-alive of over 32767 s outright, and
// the connection then had none at all.)
const MaxShellKeepalive = 5 * time.Minute

// MinShellKeepalive is the shortest api.shell_keepalive: a quiet shell is
// sent an empty frame every interval (1ns had a node send ~5 KB/s for one
// idle shell, as fast as it could). Tests that wait for a client gone use
// a quarter second.
const MinShellKeepalive = 100 * time.Millisecond

// MinMemoryLimitMB is the smallest memory_limit_mb: below it the runtime and
// the store's fixed buffers alone pass the limit.
const MinMemoryLimitMB = 32

// Default returns the configuration of a node started with no file, environment
// or flags, with DataDir derived from this process's user and environment.

func Default() Config {
	return defaults(DefaultDataDir(os.Geteuid(), os.Getenv))
}

// defaults returns every default; cluster timings stay zero (= from the profile)
// so that a profile chosen in a later layer still applies.
func defaults(dataDir string) Config {
	return Config{
		DataDir: dataDir,
		Log:     LogConfig{Level: LogInfo, Format: LogText},
		API: APIConfig{Address: DefaultAPIAddress, MaxClaimsPerUser: 100, MaxStreamsPerToken: 16, UserWritesPerSecond: 20, ResumeWindow: DefaultResumeWindow,
			ShellKeepalive: DefaultShellKeepalive},
		Cluster: ClusterConfig{
			Bind:                DefaultGossipAddress,
			Profile:             DefaultProfile,
			RejoinInterval:      DefaultRejoinInterval,
			AntiEntropyInterval: DefaultAntiEntropyInterval,
			Fanout:              DefaultFanout,
		},
		Scheduler: SchedulerConfig{
			Placement:          DefaultPlacement,
			BindTimeout:        DefaultBindTimeout,
			OfferTimeout:       DefaultOfferTimeout,
			LostGrace:          DefaultLostGrace,
			PoolMaxAssigned:    DefaultPoolMaxAssigned,
			PoolMaxAge:         DefaultPoolMaxAge,
			ActivityResolution: DefaultActivityResolution,
			MinCPU:             0.05,
			MinRAMGB:           0.05,
			MaxRebinds:         5,
			MaxRefusedPasses:   scheduler.DefaultRefusedPasses,
		},
		Store:          StoreConfig{GCInterval: DefaultGCInterval, TombstoneTTL: DefaultTombstoneTTL, TombstoneMinAge: DefaultTombstoneMinAge},
		Drivers:        defaultDrivers(),
		DefaultDrivers: true,
	}
}

// defaultDrivers is the driver list when none is configured. The node adds the
// native driver (unprivileged without root) and docker when an engine answers;
// that needs probing the host, which is not config's job.
func defaultDrivers() []DriverConfig {
	return []DriverConfig{{Name: DefaultDriver}}
}

// APIURLFile is the file in a node's data dir that holds the URL at which
// this host reaches the node's API: hf-node writes it when it starts, and
// hf-cli on the same host goes there when nothing names an endpoint.
const APIURLFile = "api.url"

// DefaultDataDir returns /var/lib/hf for root (euid 0), else $XDG_DATA_HOME/hf
// when XDG_DATA_HOME is an absolute path, else $HOME/.local/share/hf; "" when
// there is no HOME either. getenv looks up an environment variable.
func DefaultDataDir(euid int, getenv func(string) string) string {
	if euid == 0 {
		return "/var/lib/hf"
	}
	if x := getenv("XDG_DATA_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "hf")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "share", "hf")
	}
	return ""
}

// RedactedValue is what Redacted puts in place of secrets.
const RedactedValue = "REDACTED"

// Redacted returns c with every secret replaced by "REDACTED", for logging or
// showing the effective configuration: the admin token, the cluster key, token
// values, and driver config values whose key names a secret (see
// IsSecretKey). c itself is not modified.
func (c Config) Redacted() Config {
	if c.API.AdminToken != "" {
		c.API.AdminToken = RedactedValue
	}
	if c.Cluster.JoinToken != "" {
		c.Cluster.JoinToken = RedactedValue
	}
	if c.Cluster.Key != "" {
		c.Cluster.Key = RedactedValue
	}
	if c.API.Tokens != nil {
		c.API.Tokens = append([]TokenConfig(nil), c.API.Tokens...)
		for i := range c.API.Tokens {
			if c.API.Tokens[i].Token != "" {
				c.API.Tokens[i].Token = RedactedValue
			}
		}
	}
	if c.Drivers != nil {
		c.Drivers = append([]DriverConfig(nil), c.Drivers...)
		for i := range c.Drivers {
			if c.Drivers[i].Config != nil {
				c.Drivers[i].Config = redactMap(c.Drivers[i].Config)
			}
		}
	}
	return c
}

// IsSecretKey reports whether a driver config key names a secret by the usual
// conventions: it contains password, secret, token, credential, private_key or
// access_key (any case).
func IsSecretKey(key string) bool {
	k := strings.ToLower(key)
	for _, s := range []string{"password", "secret", "token", "credential", "private_key", "access_key"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// redactMap deep-copies m with the values of secret keys replaced.
func redactMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if IsSecretKey(k) && v != nil {
			out[k] = RedactedValue
			continue
		}
		out[k] = redactValue(v)
	}
	return out
}

func redactValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return redactMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactValue(e)
		}
		return out
	}
	return v
}
