package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hf-fleet/hf/lib/types"
)

// MinTokenLen is the shortest API token accepted.
const MinTokenLen = 16

// maxLabelLen is memberlist's limit on the cluster label.
const maxLabelLen = 255

var hostnameRe = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*\.?$`)

// Validate checks every value and returns all problems, each as
// "config: key: message" wrapping a *types.FieldError (so errors.Is(err,
// types.ErrInvalid) holds). Zero cluster timings are valid and mean the
// profile's value.
func (c *Config) Validate() error {
	fes := c.validate()
	errs := make([]error, 0, len(fes))
	for _, fe := range fes {
		errs = append(errs, fieldErr(fe.Field, "", "%s", fe.Message))
	}
	return errors.Join(errs...)
}

// problems collects field errors.
type problems []*types.FieldError

func (p *problems) add(err error) {
	var fe *types.FieldError
	if errors.As(err, &fe) {
		*p = append(*p, fe)
	} else if err != nil {
		*p = append(*p, &types.FieldError{Message: err.Error()})
	}
}

func (p *problems) addf(field, format string, args ...any) {
	*p = append(*p, &types.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (c *Config) validate() []*types.FieldError {
	var p problems
	if c.Name != "" {
		p.add(types.ValidateName("name", c.Name))
	}
	if strings.TrimSpace(c.DataDir) == "" {
		p.addf("data_dir", "is required (there is no HOME to derive a default from)")
	}
	p.add(types.ValidateLabels("labels", c.Labels))
	if m := c.MemoryLimitMB; m != 0 && m < MinMemoryLimitMB {
		p.addf("memory_limit_mb", "must be 0 (no limit) or at least %d, got %d", MinMemoryLimitMB, m)
	}
	oneOf(&p, "log.level", c.Log.Level, LogDebug, LogInfo, LogWarn, LogError)
	oneOf(&p, "log.format", c.Log.Format, LogText, LogJSON)
	c.API.validate(&p)
	c.Cluster.validate(&p)
	c.Scheduler.validate(&p)
	positive(&p, "store.gc_interval", c.Store.GCInterval)
	positive(&p, "store.tombstone_ttl", c.Store.TombstoneTTL)
	if c.Store.TombstoneTTL > 0 && c.Store.TombstoneTTL <= c.Cluster.AntiEntropyInterval {
		// A node that missed a delete learns it by anti-entropy; a tombstone
		// collected before that round would let the object come back.
		p.addf("store.tombstone_ttl", "must be longer than cluster.anti_entropy_interval (%s)", c.Cluster.AntiEntropyInterval)
	}
	positive(&p, "store.tombstone_min_age", c.Store.TombstoneMinAge)
	switch m := c.Store.TombstoneMinAge; {
	case m > 0 && m < c.API.ResumeWindow:
		// A stream resumed by version replays the deletes of the window.
		p.addf("store.tombstone_min_age", "must be at least api.resume_window (%s)", c.API.ResumeWindow)
	case m > 0 && c.Store.TombstoneTTL > 0 && m > c.Store.TombstoneTTL:
		p.addf("store.tombstone_min_age", "must not be longer than store.tombstone_ttl (%s)", c.Store.TombstoneTTL)
	}
	if a := c.Debug.PprofAddress; a != "" {
		checkHostPort(&p, "debug.pprof_address", a, true, 0)
		if host, _, err := net.SplitHostPort(a); err == nil && !isLoopback(host) {
			// Profiles show what the process holds and need no token.
			p.addf("debug.pprof_address", "must be a loopback address (127.0.0.1, ::1 or localhost), got %q", a)
		}
	}
	validateDrivers(&p, c.Drivers)
	return p
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func (a *APIConfig) validate(p *problems) {
	checkHostPort(p, "api.address", a.Address, false, 0)
	if host, _, err := net.SplitHostPort(a.Address); err == nil && a.PlainHTTP && !isLoopback(host) {
		p.addf("api.plain_http", "plain HTTP is allowed only on a loopback api.address, not %q (drop it: the API serves TLS with the cluster's CA)", a.Address)
	}
	if a.MaxClaimsPerUser < 0 {
		p.addf("api.max_claims_per_user", "must not be negative, got %d", a.MaxClaimsPerUser)
	}
	if a.UserWritesPerSecond < 0 || math.IsNaN(a.UserWritesPerSecond) || math.IsInf(a.UserWritesPerSecond, 0) {
		p.addf("api.user_writes_per_second", "must be a number, 0 (no limit) or more, got %v", a.UserWritesPerSecond)
	}
	if a.MaxStreamsPerToken < 1 {
		p.addf("api.max_streams_per_token", "must be at least 1, got %d", a.MaxStreamsPerToken)
	}
	positive(p, "api.resume_window", a.ResumeWindow)
	positive(p, "api.shell_keepalive", a.ShellKeepalive)
	if a.ShellKeepalive > 0 && a.ShellKeepalive < MinShellKeepalive {
		p.addf("api.shell_keepalive", "must be at least %s (a quiet shell is sent a frame every interval), got %s",
			MinShellKeepalive, a.ShellKeepalive)
	}
	if a.ShellKeepalive > MaxShellKeepalive {
		p.addf("api.shell_keepalive", "must be at most %s (a client gone is noticed within about two of these), got %s",
			MaxShellKeepalive, a.ShellKeepalive)
	}
	for i, h := range a.TLSHosts {
		if !validCertHost(h) {
			p.addf(fmt.Sprintf("api.tls_hosts[%d]", i), "want a DNS name (its first label may be *) or an IP address, got %q", h)
		}
	}
	for i, o := range a.CORSOrigins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
			p.addf(fmt.Sprintf("api.cors_origins[%d]", i), "want an origin scheme://host[:port] (no path) or *, got %q", o)
		}
	}
	if a.AdminToken != "" {
		checkToken(p, "api.admin_token", a.AdminToken)
	}
	names := map[string]int{}
	secrets := map[string]string{}
	if a.AdminToken != "" {
		secrets[a.AdminToken] = "api.admin_token"
	}
	for i, t := range a.Tokens {
		f := fmt.Sprintf("api.tokens[%d]", i)
		p.add(types.ValidateName(f+".name", t.Name))
		if j, dup := names[t.Name]; dup && t.Name != "" {
			p.addf(f+".name", "name %q is already used by api.tokens[%d]", t.Name, j)
		}
		names[t.Name] = i
		checkToken(p, f+".token", t.Token)
		if other, dup := secrets[t.Token]; dup && t.Token != "" {
			p.addf(f+".token", "same token as %s", other)
		}
		secrets[t.Token] = f + ".token"
		oneOf(p, f+".role", t.Role, RoleAdmin, RoleOperator, RoleUser)
	}
}

func checkToken(p *problems, field, tok string) {
	switch {
	case len(tok) < MinTokenLen:
		p.addf(field, "must be at least %d characters", MinTokenLen)
	case strings.ContainsFunc(tok, unicode.IsSpace):
		p.addf(field, "must not contain spaces")
	}
}

func (c *ClusterConfig) validate(p *problems) {
	checkHostPort(p, "cluster.bind", c.Bind, false, 0)
	if c.Advertise != "" {
		checkHostPort(p, "cluster.advertise", c.Advertise, true, 1)
	}
	for i, j := range c.Join {
		checkJoin(p, fmt.Sprintf("cluster.join[%d]", i), j)
	}
	if _, err := c.KeyBytes(); err != nil {
		p.addf("cluster.key", "must be base64 of 16, 24 or 32 bytes (e.g. `openssl rand -base64 32`)")
	}
	if len(c.Label) > maxLabelLen {
		p.addf("cluster.label", "must be at most %d bytes", maxLabelLen)
	}
	oneOf(p, "cluster.profile", c.Profile, ProfileLocal, ProfileLAN, ProfileWAN)
	// Zero timings mean "from the profile".
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"cluster.gossip_interval", c.GossipInterval},
		{"cluster.probe_interval", c.ProbeInterval},
		{"cluster.probe_timeout", c.ProbeTimeout},
	} {
		if d.v < 0 {
			p.addf(d.field, "must not be negative")
		}
	}
	if c.SuspicionMult < 0 {
		p.addf("cluster.suspicion_mult", "must not be negative")
	}
	if t := c.Timings(); c.ProbeTimeout >= 0 && c.ProbeInterval >= 0 && t.ProbeTimeout >= t.ProbeInterval {
		p.addf("cluster.probe_timeout", "must be less than cluster.probe_interval (%s), got %s", t.ProbeInterval, t.ProbeTimeout)
	}
	positive(p, "cluster.rejoin_interval", c.RejoinInterval)
	positive(p, "cluster.anti_entropy_interval", c.AntiEntropyInterval)
	if c.Fanout < -1 || c.Fanout == 0 {
		p.addf("cluster.fanout", "must be at least 1, or -1 (every write to every peer), got %d", c.Fanout)
	}
}

func (s *SchedulerConfig) validate(p *problems) {
	oneOf(p, "scheduler.placement", s.Placement, PlacementPack, PlacementSpread)
	positive(p, "scheduler.bind_timeout", s.BindTimeout)
	positive(p, "scheduler.offer_timeout", s.OfferTimeout)
	positive(p, "scheduler.lost_grace", s.LostGrace)
	if s.PoolMaxIdle < 0 {
		p.addf("scheduler.pool_max_idle", "must not be negative, got %s", s.PoolMaxIdle)
	}
	positive(p, "scheduler.pool_max_assigned", s.PoolMaxAssigned)
	positive(p, "scheduler.pool_max_age", s.PoolMaxAge)
	positive(p, "scheduler.activity_resolution", s.ActivityResolution)
	if s.MaxRebinds < 0 {
		p.addf("scheduler.max_rebinds", "must not be negative, got %d", s.MaxRebinds)
	}
	if s.MaxRefusedPasses < 0 {
		p.addf("scheduler.max_refused_passes", "must not be negative, got %d", s.MaxRefusedPasses)
	}
	for f, v := range map[string]float64{"scheduler.min_cpu": s.MinCPU, "scheduler.min_ram_gb": s.MinRAMGB} {
		if !(v > 0 && v <= 64) {
			p.addf(f, "must be above 0 and at most 64, got %v", v)
		}
	}
	if s.OfferTimeout > 0 && s.BindTimeout > 0 && s.OfferTimeout >= s.BindTimeout {
		p.addf("scheduler.offer_timeout", "must be less than scheduler.bind_timeout (%s)", s.BindTimeout)
	}
}

func validateDrivers(p *problems, drivers []DriverConfig) {
	seen := map[string]int{}
	for i, d := range drivers {
		f := fmt.Sprintf("drivers[%d]", i)
		p.add(types.ValidateName(f+".name", d.Name))
		if d.Instance != "" {
			for part := range strings.SplitSeq(d.Instance, "/") {
				if err := types.ValidateName(f+".instance", part); err != nil {
					p.addf(f+".instance", "must be DNS labels (lower-case letters, digits, '-') joined by '/', got %q", d.Instance)
					break
				}
			}
		}
		if _, err := d.ConfigJSON(); err != nil {
			p.addf(f+".config", "cannot be passed to the driver as JSON: %v", errors.Unwrap(err))
		}
		name := d.InstanceName()
		if j, dup := seen[name]; dup && name != "" {
			p.addf(f+".instance", "instance name %q is already used by drivers[%d]; set instance to tell them apart", name, j)
			continue
		}
		seen[name] = i
	}
}

func oneOf[T ~string](p *problems, field string, v T, allowed ...T) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	list := make([]string, len(allowed))
	for i, a := range allowed {
		list[i] = string(a)
	}
	p.addf(field, "must be one of %s, got %q", strings.Join(list, ", "), string(v))
}

func positive(p *problems, field string, d time.Duration) {
	if d <= 0 {
		p.addf(field, "must be a positive duration such as \"30s\", got %s", d)
	}
}

// checkHostPort checks "host:port": the port a number from minPort to 65535, the
// host an IP address or a DNS name (and present when needHost).
func checkHostPort(p *problems, field, addr string, needHost bool, minPort int) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.addf(field, "must be host:port, got %q", addr)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < minPort || n > 65535 {
		p.addf(field, "port must be a number from %d to 65535, got %q", minPort, port)
		return
	}
	if host == "" {
		if needHost {
			p.addf(field, "needs a host, got %q", addr)
		}
		return
	}
	if !validHost(host) {
		p.addf(field, "host must be an IP address or a DNS name, got %q", host)
	}
}

// checkJoin accepts "host:port" or a bare host (the gossip port is implied).
func checkJoin(p *problems, field, addr string) {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		checkHostPort(p, field, addr, true, 1)
		return
	}
	if !validHost(addr) {
		p.addf(field, "must be host or host:port, got %q", addr)
	}
}

// validCertHost says whether h can be a name of a certificate: an IP address
// without a zone, or a DNS name, "*.example.com" included, without the
// trailing dot that no client's name would match.
func validCertHost(h string) bool {
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Zone() == ""
	}
	name := strings.TrimPrefix(h, "*.")
	return !strings.HasSuffix(name, ".") && len(name) <= 253 && hostnameRe.MatchString(name)
}

func validHost(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	return len(h) <= 253 && hostnameRe.MatchString(h)
}
