package member

import (
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/hf-fleet/hf/lib/cluster/wire"
	"github.com/hf-fleet/hf/lib/types"
)

// Profiles: the base memberlist configuration and failure-detection timings.
const (
	// ProfileLocal is for members on one host (tests, a laptop).
	ProfileLocal = "local"
	// ProfileLAN is for one network: gossip 20 ms, probe 250 ms, probe timeout
	// 200 ms, suspicion x4, so a dead member is declared in about 1-2 s
	// (memberlist's own LAN defaults take 4-10 s) for ~0.1-0.4% of a core.
	ProfileLAN = "lan"
	// ProfileWAN is memberlist's DefaultWANConfig, for slow or lossy links.
	ProfileWAN = "wan"
)

// Defaults applied to zero Config fields.
const (
	DefaultProfile             = ProfileLAN
	DefaultRejoinInterval      = 10 * time.Second
	DefaultAntiEntropyInterval = 30 * time.Second
	DefaultReclaimAfter        = 10 * time.Second
	DefaultForgetAfter         = 24 * time.Hour
	DefaultTombstoneMinAge     = 10 * time.Minute
)

// Config configures a Member.
type Config struct {
	// Name is the stable node name (memberlist node name). It must equal the
	// store's NodeID: replication pushes the records whose version names it.
	Name string
	// Bind is the host:port for TCP and UDP gossip; port 0 picks a free one
	// (Addr tells which).
	Bind string
	// Advertise is the host:port the others reach this member at, when it
	// differs from Bind (NAT, 0.0.0.0). Optional.
	Advertise string
	// Join lists addresses (host or host:port, the port defaulting to the
	// bind port) of any members. They are joined at Start and, together with
	// the addresses of members known to be dead, every RejoinInterval, so
	// partitions heal and restarted members come back.
	Join []string
	// Known lists the addresses of members this member knew before it
	// started (hf-node: the nodes in its store). They are joined like Join,
	// at Start and every RejoinInterval, so a member restarted without Join
	// finds its cluster again; but Joined does not wait for them, as they
	// may all be gone for good.
	Known []string
	// Key is the AES key (16, 24 or 32 bytes) that encrypts and authenticates
	// all traffic; every member needs the same one. Nil means plain text.
	Key []byte
	// Keys are further keys this member accepts (not sends with), during a
	// rotation (see Member.Keyring).
	Keys [][]byte
	// Label is stamped on every packet and stream; a member with another label
	// can neither join nor inject anything. At most 255 bytes.
	Label string
	// Profile is local, lan (default) or wan: the base memberlist config and
	// the timings used for the zero fields below.
	Profile string
	// Failure-detection timings; zero means the profile's value.
	GossipInterval time.Duration
	ProbeInterval  time.Duration
	ProbeTimeout   time.Duration
	SuspicionMult  int
	// RejoinInterval is how often Join, Known and the members known to be
	// dead or gone are joined again
	// (default 10s).
	RejoinInterval time.Duration
	// AntiEntropyInterval is how often this member exchanges digests with a
	// random live peer (default 30s). Rounds also run right after a member
	// joins and when pushes were lost.
	AntiEntropyInterval time.Duration
	// Fanout is how many peers a write is sent to by its writer and by each
	// member that relays it, along a k-ary tree over the live members rooted
	// at the writer (treeChildren): a write costs each member at most Fanout
	// sends however large the cluster, and reaches N members in about
	// log_Fanout(N) hops. Zero means DefaultFanout; a negative value sends
	// every write from its writer straight to every live peer (no relays).
	Fanout int
	// ReclaimAfter is how long a dead member's name stays bound to its old
	// address: after that the name may come back from another address
	// (memberlist DeadNodeReclaimTime; default 10s). A member that left
	// gracefully may come back from anywhere at once.
	ReclaimAfter time.Duration
	// ForgetAfter is how long a dead or left member is still reported by
	// MemberStates and rejoined (default 24h).
	ForgetAfter time.Duration
	// TombstoneMinAge is how old a tombstone must be before it is collected
	// ahead of the store's TombstoneTTL, once anti-entropy has shown that
	// every member counted holds it (tombstones.go); default 10m, which
	// covers a resumed event stream's replay window. Negative: only the TTL
	// collects.
	TombstoneMinAge time.Duration
	// Compress compresses every message (memberlist's LZW). Off by default:
	// on a LAN it costs more than it saves (measured on loopback, fan-out of
	// one write to 49 peers: p99 ~30 ms without, ~70 ms with); consider it
	// for the wan profile.
	Compress bool
	// Transport replaces memberlist's NetTransport on Bind (tests inject one
	// that can cut links). A transport serves one Start: a restarted member
	// needs a new one.
	Transport memberlist.Transport
	// OnMessage receives the election messages sent to this member. It must
	// not block; it is called from one goroutine at a time, in arrival order.
	OnMessage func(wire.Message)
	// OnMembership is called after members join, leave or die (several
	// changes may be folded into one call). It must not block.
	OnMembership func()
}

// timings are the failure-detection settings of a profile.
type timings struct {
	gossip, probe, probeTimeout time.Duration
	suspicionMult               int
}

// profileBase returns memberlist's base config and the timings for profile.
func profileBase(profile string) (*memberlist.Config, timings, error) {
	// A member that missed the gossip of a join (UDP packets lost on a
	// loaded host) learns of the newcomer only at its next full state
	// exchange: memberlist's 15 s (local) or 30 s (lan) left it with another
	// view of the members, hence other owners and fan-out trees, for that
	// long. The exchange carries only the member list (no delegate state),
	// and memberlist stretches the interval past 32 members.
	switch profile {
	case ProfileLocal:
		c := memberlist.DefaultLocalConfig()
		c.PushPullInterval = 2 * time.Second
		return c, timings{20 * time.Millisecond, 200 * time.Millisecond, 100 * time.Millisecond, 3}, nil
	case ProfileLAN:
		c := memberlist.DefaultLANConfig()
		c.PushPullInterval = 5 * time.Second
		return c, timings{200 * time.Millisecond, 250 * time.Millisecond, 200 * time.Millisecond, 4}, nil
	case ProfileWAN:
		c := memberlist.DefaultWANConfig()
		return c, timings{c.GossipInterval, c.ProbeInterval, c.ProbeTimeout, c.SuspicionMult}, nil
	}
	return nil, timings{}, fmt.Errorf("profile %q: want local, lan or wan", profile)
}

// withDefaults fills the zero fields that do not depend on the profile.
func (cfg Config) withDefaults() Config {
	if cfg.Profile == "" {
		cfg.Profile = DefaultProfile
	}
	if cfg.RejoinInterval <= 0 {
		cfg.RejoinInterval = DefaultRejoinInterval
	}
	if cfg.AntiEntropyInterval <= 0 {
		cfg.AntiEntropyInterval = DefaultAntiEntropyInterval
	}
	if cfg.Fanout == 0 {
		cfg.Fanout = DefaultFanout
	}
	if cfg.ReclaimAfter <= 0 {
		cfg.ReclaimAfter = DefaultReclaimAfter
	}
	if cfg.ForgetAfter <= 0 {
		cfg.ForgetAfter = DefaultForgetAfter
	}
	if cfg.TombstoneMinAge == 0 {
		cfg.TombstoneMinAge = DefaultTombstoneMinAge
	}
	return cfg
}

// validate checks what memberlist would reject late or not at all.
func (cfg Config) validate() error {
	if err := types.ValidateName("name", cfg.Name); err != nil {
		return err
	}
	if cfg.Transport == nil {
		if _, _, err := splitHostPort(cfg.Bind); err != nil {
			return fmt.Errorf("bind: %w", err)
		}
	}
	if cfg.Advertise != "" {
		if _, _, err := splitHostPort(cfg.Advertise); err != nil {
			return fmt.Errorf("advertise: %w", err)
		}
	}
	if len(cfg.Key) > 0 {
		if err := memberlist.ValidateKey(cfg.Key); err != nil {
			return fmt.Errorf("key: %w", err)
		}
	}
	for i, k := range cfg.Keys {
		if len(cfg.Key) == 0 {
			return errors.New("keys: given without a primary key")
		}
		if err := memberlist.ValidateKey(k); err != nil {
			return fmt.Errorf("keys[%d]: %w", i, err)
		}
	}
	if len(cfg.Label) > memberlist.LabelMaxSize {
		return fmt.Errorf("label: longer than %d bytes", memberlist.LabelMaxSize)
	}
	_, t, err := profileBase(cfg.Profile)
	if err != nil {
		return err
	}
	t = cfg.effective(t)
	if t.probeTimeout >= t.probe {
		return fmt.Errorf("probe timeout %s must be less than probe interval %s", t.probeTimeout, t.probe)
	}
	return nil
}

// effective overrides the profile's timings with the non-zero fields.
func (cfg Config) effective(t timings) timings {
	if cfg.GossipInterval > 0 {
		t.gossip = cfg.GossipInterval
	}
	if cfg.ProbeInterval > 0 {
		t.probe = cfg.ProbeInterval
	}
	if cfg.ProbeTimeout > 0 {
		t.probeTimeout = cfg.ProbeTimeout
	}
	if cfg.SuspicionMult > 0 {
		t.suspicionMult = cfg.SuspicionMult
	}
	return t
}

// memberlistConfig builds the memberlist config; the caller sets the
// delegates.
func (cfg Config) memberlistConfig(log *slog.Logger) (*memberlist.Config, error) {
	mc, t, err := profileBase(cfg.Profile)
	if err != nil {
		return nil, err
	}
	t = cfg.effective(t)
	mc.Name = cfg.Name
	mc.GossipInterval = t.gossip
	mc.ProbeInterval = t.probe
	mc.ProbeTimeout = t.probeTimeout
	mc.SuspicionMult = t.suspicionMult
	mc.DeadNodeReclaimTime = cfg.ReclaimAfter
	mc.Label = cfg.Label
	mc.EnableCompression = cfg.Compress
	mc.GossipVerifyIncoming = true
	mc.GossipVerifyOutgoing = true
	if len(cfg.Key) > 0 {
		kr, err := memberlist.NewKeyring(cfg.Keys, cfg.Key)
		if err != nil {
			return nil, fmt.Errorf("keyring: %w", err)
		}
		mc.Keyring = kr
	}
	mc.Logger = newMemberlistLogger(log)
	mc.LogOutput = nil
	mc.Transport = cfg.Transport
	if cfg.Transport == nil {
		host, port, err := splitHostPort(cfg.Bind)
		if err != nil {
			return nil, fmt.Errorf("bind: %w", err)
		}
		if host == "" {
			host = "0.0.0.0"
		}
		mc.BindAddr, mc.BindPort = host, port
		mc.AdvertisePort = port
	}
	if cfg.Advertise != "" {
		host, port, err := splitHostPort(cfg.Advertise)
		if err != nil {
			return nil, fmt.Errorf("advertise: %w", err)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = host, port
	}
	return mc, nil
}

// splitHostPort parses host:port with a numeric port.
func splitHostPort(s string) (string, int, error) {
	if s == "" {
		return "", 0, errors.New("address is required")
	}
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("address %q: bad port", s)
	}
	return host, port, nil
}

// newMemberlistLogger routes memberlist's log lines into slog at Debug.
func newMemberlistLogger(l *slog.Logger) *log.Logger {
	return log.New(logWriter{log: l}, "", 0)
}
