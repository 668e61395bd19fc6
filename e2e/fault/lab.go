// Package fault runs several hf-node processes as separate hosts, each in a
// network namespace of its own joined to the others by a bridge, injects
// faults while claims arrive through the REST API (kill -9 and restart, a
// partition of one host in both directions and its heal, packet loss), and
// checks the cluster's invariants once it has settled (see Check).
//
// It needs root (ip netns, iptables) and the hf-node binary. The short form
// runs in the test suite (TestFaults); the long form is the hf-fault command
// (go run ./e2e/fault/hf-fault -runs 10).
//
// Layout: a switch namespace holds a bridge; each host namespace has one veth
// into it, with the address <prefix>.<i+1>/24; the root namespace reaches
// the bridge through one more veth with <prefix>.254, so the harness talks to
// every host's API directly. Faults are iptables rules inside a host's
// namespace, in chains of their own: HFPART (a partition: DROP to and from
// the other hosts) and HFLOSS (random DROP of what comes from the others).
package fault

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hf-fleet/hf/lib/pki"
)

// AdminToken is the admin token of every host of a lab.
const AdminToken = "hf-fault-admin-token-0123456789abcdef"

// Options configure a lab.
type Options struct {
	// Hosts is the number of hosts (default 3).
	Hosts int
	// Bin is the hf-node binary (required).
	Bin string
	// Dir holds the hosts' data dirs, configs and logs (required).
	Dir string
	// LostGrace is the hosts' scheduler.lost_grace (default 10s).
	LostGrace time.Duration
	// BindTimeout is the hosts' scheduler.bind_timeout (default 2m).
	BindTimeout time.Duration
	// Logf reports progress (default: discarded).
	Logf func(format string, args ...any)
}

// Lab is a running set of hosts.
type Lab struct {
	opts   Options
	id     string
	prefix string // "10.a.b."
	sw     string // switch namespace
	rootIf string // the root namespace's veth
	Hosts  []*Host
	// ca is the lab cluster's CA, given to every host as if each had
	// joined with a join token; http trusts it. key is the gossip key.
	ca   *pki.CA
	key  string
	http *http.Client
}

// Host is one hf-node process in its namespace.
type Host struct {
	Name    string
	NS      string
	IP      string
	API     string // https://ip:7700
	DataDir string
	config  string
	log     string
	cmd     *exec.Cmd
	done    chan struct{}
	lab     *Lab
}

// Up reports whether the host's process runs.
func (h *Host) Up() bool {
	if h.cmd == nil {
		return false
	}
	select {
	case <-h.done:
		return false
	default:
		return true
	}
}

// DriverDir is the data dir of the host's test driver instance.
func (h *Host) DriverDir() string { return filepath.Join(h.DataDir, "drivers", "test") }

// Log returns the host's log so far.
func (h *Host) Log() string {
	b, _ := os.ReadFile(h.log)
	return string(b)
}

// New builds the namespaces and starts every host; Close undoes it all, also
// after a failure half-way.
func New(ctx context.Context, opts Options) (l *Lab, err error) {
	if opts.Hosts <= 0 {
		opts.Hosts = 3
	}
	if opts.LostGrace <= 0 {
		opts.LostGrace = 10 * time.Second
	}
	if opts.BindTimeout <= 0 {
		opts.BindTimeout = 2 * time.Minute
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Bin == "" || opts.Dir == "" {
		return nil, errors.New("fault: Options.Bin and Options.Dir are required")
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("fault: needs root (network namespaces and iptables)")
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	l = &Lab{opts: opts, id: id, prefix: fmt.Sprintf("10.%d.%d.", 200+int(b[0])%50, b[1]), sw: "hf-" + id + "-sw", rootIf: "hf" + id + "r"}
	defer func() {
		if err != nil {
			l.Close()
			l = nil
		}
	}()
	steps := [][]string{
		{"netns", "add", l.sw},
		{"-n", l.sw, "link", "set", "lo", "up"},
		{"-n", l.sw, "link", "add", "br0", "type", "bridge"},
		{"-n", l.sw, "link", "set", "br0", "up"},
		{"link", "add", l.rootIf, "type", "veth", "peer", "name", "uplink", "netns", l.sw},
		{"-n", l.sw, "link", "set", "uplink", "master", "br0", "up"},
		{"addr", "add", l.prefix + "254/24", "dev", l.rootIf},
		{"link", "set", l.rootIf, "up"},
	}
	for _, s := range steps {
		if err := ip(ctx, s...); err != nil {
			return l, err
		}
	}
	if l.ca, err = pki.NewCA("lab-"+id, time.Now()); err != nil {
		return l, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	l.key = base64.StdEncoding.EncodeToString(key)
	l.http = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: l.ca.Pool(), MinVersion: tls.VersionTLS12}}}
	for i := range opts.Hosts {
		h := &Host{Name: "n" + strconv.Itoa(i), NS: "hf-" + id + "-" + strconv.Itoa(i), IP: l.prefix + strconv.Itoa(i+1), lab: l}
		h.API = "https://" + h.IP + ":7700"
		h.DataDir = filepath.Join(opts.Dir, h.Name)
		h.config = filepath.Join(opts.Dir, h.Name+".yml")
		h.log = filepath.Join(opts.Dir, h.Name+".log")
		l.Hosts = append(l.Hosts, h)
		veth := "h" + strconv.Itoa(i)
		for _, s := range [][]string{
			{"netns", "add", h.NS},
			{"-n", h.NS, "link", "set", "lo", "up"},
			{"-n", l.sw, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", h.NS},
			{"-n", l.sw, "link", "set", veth, "master", "br0", "up"},
			{"-n", h.NS, "addr", "add", h.IP + "/24", "dev", "eth0"},
			{"-n", h.NS, "link", "set", "eth0", "up"},
		} {
			if err := ip(ctx, s...); err != nil {
				return l, err
			}
		}
		for _, rule := range [][]string{
			{"-N", "HFPART"}, {"-N", "HFLOSS"},
			{"-A", "INPUT", "-j", "HFPART"}, {"-A", "OUTPUT", "-j", "HFPART"}, {"-A", "INPUT", "-j", "HFLOSS"},
		} {
			if err := h.iptables(ctx, rule...); err != nil {
				return l, err
			}
		}
	}
	for _, h := range l.Hosts {
		if err := l.writeConfig(h); err != nil {
			return l, err
		}
		if err := pki.SaveCA(filepath.Join(h.DataDir, "cluster"), l.ca); err != nil {
			return l, err
		}
	}
	for _, h := range l.Hosts {
		if err := h.Start(ctx); err != nil {
			return l, err
		}
	}
	return l, l.WaitMembers(ctx, 60*time.Second)
}

// writeConfig writes a host's hf-node config: its addresses, the others to
// join, a test driver with room for every claim of a run, and the lab's
// scheduler timings.
func (l *Lab) writeConfig(h *Host) error {
	var join []string
	for _, o := range l.Hosts {
		if o != h {
			join = append(join, `"`+o.IP+`:7701"`)
		}
	}
	cfg := fmt.Sprintf(`name: %s
data_dir: %s
log:
  level: info
api:
  address: %s:7700
cluster:
  bind: %s:7701
  join: [%s]
  key: %s
  rejoin_interval: 2s
  anti_entropy_interval: 5s
drivers:
  - name: test
    config: {cpus: 100000, ram_gb: 100000}
scheduler:
  placement: spread
  lost_grace: %s
  bind_timeout: %s
`, h.Name, h.DataDir, h.IP, h.IP, strings.Join(join, ", "), l.key, l.opts.LostGrace, l.opts.BindTimeout)
	return os.WriteFile(h.config, []byte(cfg), 0o600)
}

// Start starts the host's process (again, on the same data dir) and waits
// until its API answers.
func (h *Host) Start(ctx context.Context) error {
	if h.Up() {
		return fmt.Errorf("%s is running", h.Name)
	}
	out, err := os.OpenFile(h.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command("ip", "netns", "exec", h.NS, h.lab.opts.Bin, "--config", h.config)
	cmd.Env = append(os.Environ(), "HF_ADMIN_TOKEN="+AdminToken)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", h.Name, err)
	}
	h.cmd, h.done = cmd, make(chan struct{})
	go func(done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(h.done)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if !h.Up() {
			return fmt.Errorf("%s exited at start:\n%s", h.Name, tail(h.Log(), 20))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.API+"/healthz", nil)
		if resp, err := h.lab.http.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: API did not answer in 30s:\n%s", h.Name, tail(h.Log(), 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Kill ends the host's process with SIGKILL (ip netns exec runs hf-node in
// its own process, so the signal reaches it).
func (h *Host) Kill() {
	if !h.Up() {
		return
	}
	_ = h.cmd.Process.Kill()
	<-h.done
}

// Stop ends the host's process with SIGTERM, and SIGKILL after 30 s.
func (h *Host) Stop() {
	if !h.Up() {
		return
	}
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
		h.Kill()
	}
}

// Partition cuts h from every other host, both ways (the harness still
// reaches its API).
func (l *Lab) Partition(ctx context.Context, h *Host) error {
	for _, o := range l.Hosts {
		if o == h {
			continue
		}
		if err := h.iptables(ctx, "-A", "HFPART", "-s", o.IP, "-j", "DROP"); err != nil {
			return err
		}
		if err := h.iptables(ctx, "-A", "HFPART", "-d", o.IP, "-j", "DROP"); err != nil {
			return err
		}
	}
	return nil
}

// Heal removes every partition rule.
func (l *Lab) Heal(ctx context.Context) error {
	for _, h := range l.Hosts {
		if err := h.iptables(ctx, "-F", "HFPART"); err != nil {
			return err
		}
	}
	return nil
}

// Loss drops each packet from another host with probability p, on every
// host; p = 0 ends it.
func (l *Lab) Loss(ctx context.Context, p float64) error {
	for _, h := range l.Hosts {
		if err := h.iptables(ctx, "-F", "HFLOSS"); err != nil {
			return err
		}
		if p == 0 {
			continue
		}
		for _, o := range l.Hosts {
			if o == h {
				continue
			}
			if err := h.iptables(ctx, "-A", "HFLOSS", "-s", o.IP, "-m", "statistic", "--mode", "random",
				"--probability", strconv.FormatFloat(p, 'f', 4, 64), "-j", "DROP"); err != nil {
				return err
			}
		}
	}
	return nil
}

// WaitMembers waits until every running host lists every running host as Up.
func (l *Lab) WaitMembers(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := l.membersUp(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("members: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (l *Lab) membersUp(ctx context.Context) error {
	for _, h := range l.Hosts {
		if !h.Up() {
			continue
		}
		nodes, err := h.nodes(ctx)
		if err != nil {
			return err
		}
		for _, o := range l.Hosts {
			if o.Up() && nodes[o.Name] != "Up" {
				return fmt.Errorf("%s sees %s as %q", h.Name, o.Name, nodes[o.Name])
			}
		}
	}
	return nil
}

// Close stops every host and removes the namespaces and links.
func (l *Lab) Close() {
	for _, h := range l.Hosts {
		h.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, h := range l.Hosts {
		_ = ip(ctx, "netns", "del", h.NS)
	}
	_ = ip(ctx, "netns", "del", l.sw)
	_ = ip(ctx, "link", "del", l.rootIf) // (gone with its peer, usually)
}

func (h *Host) iptables(ctx context.Context, args ...string) error {
	return run(ctx, "ip", append([]string{"netns", "exec", h.NS, "iptables", "-w"}, args...)...)
}

func ip(ctx context.Context, args ...string) error { return run(ctx, "ip", args...) }

func run(ctx context.Context, name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
