package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// unavailable ends a test that lacks something of the host (root, a tool): it
// fails under CI, where everything must be there, and is skipped elsewhere.
func unavailable(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set, so this fails instead of skipping)", why)
	}
	t.Skipf("%s; skipping outside CI", why)
}

// needRoot ends the test (see unavailable) unless it runs as root with
// useradd and userdel, which the native driver's privileged mode needs.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "the native driver's privileged mode needs root")
	}
	for _, tool := range []string{"useradd", "userdel"} {
		if sbin(tool) == "" {
			unavailable(t, tool+" not found (apt-get install passwd)")
		}
	}
}

// sbin finds a user-management tool on PATH or in the sbin directories.
func sbin(name string) string {
	for _, cand := range []string{name, "/usr/sbin/" + name, "/sbin/" + name} {
		if p, err := exec.LookPath(cand); err == nil {
			return p
		}
	}
	return ""
}

// randHex returns n random bytes as hex.
func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startWithConfig writes cfg (YAML) to a file and starts hf-node with it.
func startWithConfig(t *testing.T, dataDir, cfg string, extra ...string) *proc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hf.yml")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	return startNode(t, dataDir, append([]string{"--config", path}, extra...)...)
}

var (
	cliDirOnce sync.Once
	cliDir     string
)

// errNotFound is what run returns when hf-cli exits 3 (no such object).
var errNotFound = errors.New("not found")

// run runs hf-cli against p and returns its standard output. Unlike cli it
// never touches the test, so it is safe in Eventually conditions; a non-zero
// exit is an error (errNotFound for exit 3).
func (p *proc) run(args ...string) (string, error) {
	cliDirOnce.Do(func() { cliDir, _ = os.MkdirTemp(bin, "cli-") })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "hf-cli"), args...)
	cmd.Env = append(os.Environ(), "HF_ENDPOINT="+p.API, "HF_TOKEN="+p.Token, "HF_CA_FILE="+p.caFile(), "HF_CONFIG_DIR="+cliDir)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), nil
	case errors.As(err, &ee) && ee.ExitCode() == 3:
		return out.String(), fmt.Errorf("hf-cli %v: %w: %s", args, errNotFound, errb.String())
	}
	return out.String(), fmt.Errorf("hf-cli %v: %w: %s%s", args, err, out.String(), errb.String())
}

// getJSON runs `hf-cli ARGS -o json` and decodes the output into v.
func (p *proc) getJSON(v any, args ...string) error {
	out, err := p.run(append(args, "-o", "json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("decode %v: %w: %s", args, err, out)
	}
	return nil
}

// claim reads a claim through hf-cli.
func (p *proc) claim(name string) (types.MachineClaim, error) {
	var c types.MachineClaim
	return c, p.getJSON(&c, "claim", "get", name)
}

// machine reads a machine through hf-cli.
func (p *proc) machine(name string) (types.Machine, error) {
	var m types.Machine
	return m, p.getJSON(&m, "machine", "get", name)
}

// machines lists the machines through hf-cli.
func (p *proc) machines() ([]types.Machine, error) {
	var l struct{ Items []types.Machine }
	return l.Items, p.getJSON(&l, "machine", "list")
}

// claims lists the claims through hf-cli.
func (p *proc) claims() ([]types.MachineClaim, error) {
	var l struct{ Items []types.MachineClaim }
	return l.Items, p.getJSON(&l, "claim", "list")
}

// createTemplate creates tmpl through hf-cli.
func (p *proc) createTemplate(tmpl types.MachineTemplate) {
	p.t.Helper()
	tmpl.Kind = types.KindMachineTemplate
	b, err := json.Marshal(tmpl)
	require.NoError(p.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, errOut, code := p.cli(ctx, bytes.NewReader(b), "template", "create", "-f", "-")
	require.Equal(p.t, 0, code, "template create: %s%s", out, errOut)
}

// rawJSON marshals v for a template's providerConfiguration.
func rawJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

var boundOn = regexp.MustCompile(`Bound on node (\S+) \(machine (m-[0-9a-f]+)\) in (\S+)`)

// claimWait creates claim name of template with `claim create --wait` (and
// the extra flags) and returns the node and machine it was bound to.
func (p *proc) claimWait(name, template string, extra ...string) (node, machine string) {
	p.t.Helper()
	args := append([]string{"claim", "create", name, "--template", template, "--wait", "--wait-timeout", "60s"}, extra...)
	out := p.mustCLI(args...)
	m := boundOn.FindStringSubmatch(out)
	require.NotNil(p.t, m, "no Bound line in %q", out)
	return m[1], m[2]
}

// passwdEntry is a line of /etc/passwd.
type passwdEntry struct {
	Name  string
	UID   int
	GID   int
	GECOS string
	Home  string
}

// usersWithPrefix returns the users of /etc/passwd whose name starts with prefix.
func usersWithPrefix(t require.TestingT, prefix string) map[string]passwdEntry {
	b, err := os.ReadFile("/etc/passwd")
	require.NoError(t, err)
	out := map[string]passwdEntry{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 7 || !strings.HasPrefix(f[0], prefix) {
			continue
		}
		uid, _ := strconv.Atoi(f[2])
		gid, _ := strconv.Atoi(f[3])
		out[f[0]] = passwdEntry{Name: f[0], UID: uid, GID: gid, GECOS: f[4], Home: f[5]}
	}
	return out
}

// groupExists reports whether /etc/group has a group called name.
func groupExists(t require.TestingT, name string) bool {
	b, err := os.ReadFile("/etc/group")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, name+":") {
			return true
		}
	}
	return false
}

// hostProc is a live process of the host.
type hostProc struct {
	PID int
	UID int
	Cmd string
}

// procsOf returns the live (not zombie) processes whose real or effective
// user id is uid.
func procsOf(uid int) []hostProc {
	var out []hostProc
	for _, p := range hostProcs() {
		if p.UID == uid {
			out = append(out, p)
		}
	}
	return out
}

// hostProcs lists the live processes of the host with their real user id
// (also matched on the effective one through a second entry when they differ).
func hostProcs() []hostProc {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []hostProc
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "status"))
		if err != nil {
			continue // gone meanwhile
		}
		var uids []int
		zombie := false
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "State:"); ok && strings.HasPrefix(strings.TrimSpace(v), "Z") {
				zombie = true
			}
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				for _, f := range strings.Fields(v)[:2] {
					n, _ := strconv.Atoi(f)
					uids = append(uids, n)
				}
			}
		}
		if zombie || len(uids) == 0 {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		c := strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
		out = append(out, hostProc{PID: pid, UID: uids[0], Cmd: c})
		if uids[1] != uids[0] {
			out = append(out, hostProc{PID: pid, UID: uids[1], Cmd: c})
		}
	}
	return out
}

// nativeHost is a directory for the native driver's workspaces and homes that
// the machine users can reach (t.TempDir is private to root).
func nativeHost(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hfe2e-native-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// cleanupUsers removes, when the test ends (after the nodes it starts later
// have stopped), every user whose name starts with one of prefixes: its
// processes, the user, its group and its home. A passing test leaves none;
// this is for failures.
func cleanupUsers(t *testing.T, prefixes ...string) {
	t.Helper()
	t.Cleanup(func() {
		for _, prefix := range prefixes {
			for name, u := range usersWithPrefix(t, prefix) {
				t.Logf("clean up user %s (uid %d) left behind", name, u.UID)
				for range 50 {
					ps := procsOf(u.UID)
					if len(ps) == 0 {
						break
					}
					for _, p := range ps {
						_ = syscall.Kill(p.PID, syscall.SIGKILL)
					}
					time.Sleep(20 * time.Millisecond)
				}
				if out, err := exec.Command(sbin("userdel"), "--force", name).CombinedOutput(); err != nil {
					t.Logf("userdel %s: %v: %s", name, err, out)
				}
				if groupExists(t, name) {
					_ = exec.Command(sbin("groupdel"), name).Run()
				}
				if u.Home != "" && filepath.Base(u.Home) == name {
					_ = os.RemoveAll(u.Home)
				}
			}
		}
	})
}

// tarGz returns a tar.gz archive of files (name -> content) and its sum.
func tarGz(t *testing.T, files map[string]string) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, content := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644,
			Size: int64(len(content)), ModTime: time.Unix(1700000000, 0)}))
		_, err := tw.Write([]byte(content))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), "sha256:" + hex.EncodeToString(sum[:])
}
