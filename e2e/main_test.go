package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"github.com/hf-fleet/hf/internal/syncbuf"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var bin string // directory holding the built binaries

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hf-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = dir
	for _, name := range []string{"hf-node", "hf-cli"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), "github.com/hf-fleet/hf/cmd/"+name).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", name, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	_, statErr := os.Stat(defaultNativeDir)
	code := m.Run()
	removeDefaultNetwork()
	if os.IsNotExist(statErr) {
		removeDefaultNativeDir()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one running hf-node process.
type proc struct {
	t       testing.TB
	cmd     *exec.Cmd
	dataDir string
	args    []string
	extra   []string // the caller's arguments, kept for restart
	API     string   // http://host:port
	Gossip  string   // host:port
	Token   string
	Name    string
	out     *syncbuf.Buffer
	done    chan struct{}
}

var (
	apiLine    = regexp.MustCompile(`api:\s+(https?://\S+)`)
	gossipLine = regexp.MustCompile(`gossip:\s+(\S+)`)
	tokenLine  = regexp.MustCompile(`admin token \(shown once[^)]*\): (\S+)`)
	nameLine   = regexp.MustCompile(`^hf-node (\S+) `)
)

// startNode starts hf-node with a fresh or given data dir and waits until it
// prints its API address.
func startNode(t testing.TB, dataDir string, extra ...string) *proc {
	t.Helper()
	p, lines := launchNode(t, dataDir, extra...)
	p.await(lines)
	return p
}

// startNodes starts n nodes at the same instant, with the same arguments,
// and waits for each as startNode does: joiners that meet the cluster
// together.
func startNodes(t testing.TB, n int, extra ...string) []*proc {
	t.Helper()
	if i := slices.Index(extra, "--join"); i >= 0 && i+1 < len(extra) && !slices.Contains(extra, "--join-token") {
		// One token for all, fetched first, so the starts are not spaced
		// out by the CLI runs that make tokens.
		extra = append(slices.Clone(extra), "--join-token", joinTokenOf(t, extra[i+1]))
	}
	ps := make([]*proc, n)
	lines := make([]chan string, n)
	for i := range ps {
		ps[i], lines[i] = launchNode(t, "", extra...)
	}
	for i, p := range ps {
		p.await(lines[i])
	}
	return ps
}

// launchNode starts hf-node on dataDir (a new temp dir when empty) with
// extra arguments; await waits for what it prints at start.
func launchNode(t testing.TB, dataDir string, extra ...string) (*proc, chan string) {
	t.Helper()
	return launchNodeUnder(t, nil, dataDir, extra...)
}

// launchNodeUnder is launchNode with hf-node started by a launcher: the
// command under, given hf-node's path and arguments after its own (as
// nohup is). The launcher must exec hf-node, so that its pid is the node's.
func launchNodeUnder(t testing.TB, under []string, dataDir string, extra ...string) (*proc, chan string) {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	args := append([]string{"--data-dir", dataDir, "--api", "127.0.0.1:0", "--gossip", "127.0.0.1:0"}, extra...)
	_, err := os.Stat(filepath.Join(dataDir, "cluster", "ca.crt"))
	if i := slices.Index(extra, "--join"); i >= 0 && i+1 < len(extra) && !slices.Contains(extra, "--join-token") && err != nil {
		// A node joins as a new user's would: with a join token of the
		// member it joins (unused when its data dir has the secrets).
		args = append(args, "--join-token", joinTokenOf(t, extra[i+1]))
	}
	p := &proc{t: t, dataDir: dataDir, args: args, extra: extra, out: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(bin, "hf-node"), args...)
	if len(under) > 0 {
		p.cmd = exec.Command(under[0], append(append(slices.Clone(under[1:]), p.cmd.Path), args...)...)
	}
	p.cmd.Env = append(os.Environ(), "HF_LOG_LEVEL=debug")
	p.cmd.Stderr = p.out
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.out.Write([]byte(sc.Text() + "\n"))
			lines <- sc.Text()
		}
		close(lines)
	}()
	t.Cleanup(func() { p.stop() })
	return p, lines
}

// await reads a launched node's output until it has printed its address
// and its admin token.
func (p *proc) await(lines chan string) {
	t := p.t
	t.Helper()
	deadline := time.After(30 * time.Second)
	for p.API == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("hf-node exited before printing its address:\n%s", p.out.String())
			}
			if m := nameLine.FindStringSubmatch(l); m != nil {
				p.Name = m[1]
			}
			if m := tokenLine.FindStringSubmatch(l); m != nil {
				p.Token = m[1]
			}
			if m := apiLine.FindStringSubmatch(l); m != nil {
				p.API = m[1]
			}
		case <-deadline:
			t.Fatalf("hf-node did not print its address in 30s:\n%s", p.out.String())
		}
	}
	// The token line follows the address on a first start.
	for p.Token == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("hf-node exited:\n%s", p.out.String())
			}
			if m := tokenLine.FindStringSubmatch(l); m != nil {
				p.Token = m[1]
			}
			if m := gossipLine.FindStringSubmatch(l); m != nil {
				p.Gossip = m[1]
			}
			if strings.Contains(l, "admin token: in") {
				b, err := os.ReadFile(filepath.Join(p.dataDir, "admin.token"))
				require.NoError(t, err)
				p.Token = strings.TrimSpace(string(b))
			}
			if strings.Contains(l, "admin token: the cluster's") {
				p.Token = joinedToken(t, p, p.args)
			}
		case <-deadline:
			t.Fatalf("no token line:\n%s", p.out.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	if p.Gossip != "" {
		gossipProcs.Store(p.Gossip, p)
	}
}

// gossipProcs maps the gossip address of every node started to it, for the
// nodes that join it.
var gossipProcs sync.Map

// joinTokenOf makes a join token on the node at gossip address addr.
func joinTokenOf(t testing.TB, addr string) string {
	t.Helper()
	p, ok := gossipProcs.Load(addr)
	require.True(t, ok, "no node started at %s", addr)
	out := p.(*proc).mustCLI("cluster", "join-token", "-o", "json")
	var jt struct{ Token string }
	require.NoError(t, json.Unmarshal([]byte(out), &jt), out)
	return jt.Token
}

// joinedToken is the admin token of the cluster a node joined (that of
// the node at its --join address), once the node has it: the cluster's
// tokens reach a joining node by replication.
func joinedToken(t testing.TB, p *proc, args []string) string {
	t.Helper()
	i := slices.Index(args, "--join")
	require.True(t, i >= 0 && i+1 < len(args), "a node that prints no token of its own joined a cluster: %v", args)
	first, ok := gossipProcs.Load(args[i+1])
	require.True(t, ok, "no node started at %s", args[i+1])
	tok := first.(*proc).Token
	ok = assert.Eventually(t, func() bool {
		req, err := http.NewRequest(http.MethodGet, p.API+"/api/v1/whoami", nil)
		if err != nil {
			return false
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := p.httpClient().Do(req)
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, 10*time.Second, 50*time.Millisecond, "the cluster's admin token reaches the joining node (by its catch-up pull after the join, well before the first periodic anti-entropy round at 30 s)")
	if !ok {
		t.Fatalf("the joining node's log:\n%s\nthe log of the node it joined:\n%s", p.out.String(), first.(*proc).out.String())
	}
	return tok
}

// caFile is the cluster CA the node keeps in its data dir.
func (p *proc) caFile() string { return filepath.Join(p.dataDir, "cluster", "ca.crt") }

// tlsConfig trusts the node's cluster CA.
func (p *proc) tlsConfig() *tls.Config {
	pem, err := os.ReadFile(p.caFile())
	require.NoError(p.t, err)
	pool := x509.NewCertPool()
	require.True(p.t, pool.AppendCertsFromPEM(pem))
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// httpClient trusts the node's cluster CA.
func (p *proc) httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: p.tlsConfig()}}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			p.t.Errorf("hf-node exited %d:\n%s", code, p.out.String())
		}
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		p.t.Errorf("hf-node did not stop on SIGTERM:\n%s", p.out.String())
	}
}

// restart starts hf-node again on p's data dir with p's arguments and its
// gossip address (so peers reach it where they knew it), plus more; p must
// have stopped.
func (p *proc) restart(more ...string) *proc {
	p.t.Helper()
	args := append(append(append([]string{}, p.extra...), "--gossip", p.Gossip), more...)
	return startNode(p.t, p.dataDir, args...)
}

// kill ends the process with SIGKILL.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// cli runs hf-cli against p and returns stdout, stderr and the exit code.
func (p *proc) cli(ctx context.Context, stdin io.Reader, args ...string) (string, string, int) {
	p.t.Helper()
	env := append(os.Environ(), "HF_ENDPOINT="+p.API, "HF_TOKEN="+p.Token, "HF_CA_FILE="+p.caFile(), "HF_CONFIG_DIR="+p.t.TempDir())
	return runCLI(ctx, p.t, env, stdin, args...)
}

// runCLI runs hf-cli with exactly env and returns stdout, stderr and the
// exit code.
func runCLI(ctx context.Context, t testing.TB, env []string, stdin io.Reader, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "hf-cli"), args...)
	cmd.Env, cmd.Stdin = env, stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "run hf-cli: %v", err)
		code = ee.ExitCode()
	}
	return out.String(), errb.String(), code
}

// mustCLI runs hf-cli and fails the test on a non-zero exit.
func (p *proc) mustCLI(args ...string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, errOut, code := p.cli(ctx, nil, args...)
	require.Equal(p.t, 0, code, "hf-cli %v: %s%s", args, out, errOut)
	return out + errOut
}

// removeDefaultNetwork removes the docker network that hf-nodes started with no
// config (docker driver added because an engine answers) create, when no
// container uses it any more.
// defaultNativeDir holds the native driver's workspaces by default as root,
// outside any data dir (machine users must reach them): the nodes of the
// tests that run the default drivers as root make it.
const defaultNativeDir = "/var/lib/hf-native"

// removeDefaultNativeDir removes the default native workspace dir the run
// made, once empty (os.Remove removes no workspace a test left: that stays
// for someone to see).
func removeDefaultNativeDir() {
	_ = os.Remove(filepath.Join(defaultNativeDir, "workspace"))
	_ = os.Remove(defaultNativeDir)
}

func removeDefaultNetwork() {
	out, err := exec.Command("docker", "network", "ls", "-q", "--filter", "name=^hf$", "--filter", "label=hf.network").Output()
	if err != nil {
		return
	}
	for _, id := range strings.Fields(string(out)) {
		_ = exec.Command("docker", "network", "rm", id).Run()
	}
}
