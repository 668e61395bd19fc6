package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The dashboard in a real browser: Debian's chromium, headless, driven by
// chromedp against three hf-node processes. Screenshots go to
// $HF_SCREENSHOTS (kept) or a test temp dir (logged, removed after).

// chromium finds the browser. In CI its absence fails the test: a browser
// test that skips there proves nothing.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (apt-get install chromium); CI runs the browser tests")
	}
	t.Skip("chromium is not installed (apt-get install chromium): browser tests skipped")
	return ""
}

// browser starts a headless chromium and returns its context. The nodes
// serve HTTPS with the cluster's own CA, which a throwaway browser profile
// cannot be told to trust without touching the host's certificate stores:
// --ignore-certificate-errors is given to this test browser only (the
// API's TLS itself is tested with the CA pinned elsewhere).
func browser(t *testing.T, exe string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.NoSandbox, // root in CI; the page is our own
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	// The first run starts the browser, which lives as long as its
	// context: no timeout on that one, a timeout on every later step.
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	return ctx
}

func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("HF_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("screenshots in %s", dir)
	return dir
}

// shot saves a full-page screenshot as dir/name.png.
func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG; less is JPEG
	require.NoError(t, err, "screenshot %s", name)
	p := filepath.Join(dir, name+".png")
	require.NoError(t, os.WriteFile(p, png, 0o644))
	t.Logf("screenshot %s", p)
}

// create posts YAML objects through hf-cli.
func (p *proc) create(yaml string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut, code := p.cli(ctx, strings.NewReader(yaml), "create", "-f", "-")
	require.Equal(p.t, 0, code, "hf-cli create: %s%s", out, errOut)
}

// do runs browser steps and fails the test on an error.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, steps...), what)
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, expr)
	return v
}

// signIn opens the dashboard and signs in with tok.
func signIn(url, tok string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		navigate(url+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), tok),
		chromedp.Click(chromedp.CSS(`#signin button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#live[data-state="live"]`)),
	)
}

// navigate loads url, again when Chromium gives the load up because the
// host's network changed (net::ERR_NETWORK_CHANGED): the fault harness's
// tests, in another package that go test runs beside this one, make and
// remove network namespaces and veth pairs on this host (CI failed so).
func navigate(url string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		var err error
		for range 5 {
			_, err = chromedp.Navigate(url)(ctx, tg)
			if err == nil || !strings.Contains(err.Error(), "ERR_NETWORK_CHANGED") {
				return err
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(200 * time.Millisecond):
			}
		}
		return err
	})
}

// poll waits up to 30 s for a JavaScript predicate to hold in the page.
func poll(predicate string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Poll[bool](predicate, chromedp.WithPollingTimeout(30*time.Second))(ctx, tg)
		return err
	})
}

func click(sel string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(sel)) }
func visible(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(sel))
}

func TestDashboardInBrowser(t *testing.T) {
	exe := chromium(t)
	cfg := filepath.Join(t.TempDir(), "hf.yml")
	require.NoError(t, os.WriteFile(cfg, []byte("drivers:\n  - name: test\n    config: {cpus: 8, ram_gb: 16}\n"), 0o600))
	n1 := startNode(t, "", "--config", cfg)
	n2 := startNode(t, "", "--config", cfg, "--join", n1.Gossip)
	n3 := startNode(t, "", "--config", cfg, "--join", n1.Gossip)
	n1.create(`
kind: MachineTemplate
metadata: {name: small}
spec:
  resources: {cpu: 1, ramGB: 2}
  providerConfiguration: {test: {}}
---
kind: MachineTemplate
metadata: {name: warm}
spec:
  resources: {cpu: 2, ramGB: 2}
  providerConfiguration: {test: {}}
`)
	n1.mustCLI("user", "create", "alice", "--role", "user")
	var tok struct{ Token string }
	require.NoError(t, json.Unmarshal([]byte(n1.mustCLI("token", "create", "alice-web", "--user", "alice", "--role", "user", "-o", "json")), &tok))
	require.NotEmpty(t, tok.Token)

	dir := screenshotDir(t)
	ctx := browser(t, exe)

	// The fleet: three nodes, each with its driver's capacity bars.
	do(t, ctx, "sign in, see the fleet", signIn(n2.API, n1.Token),
		visible(`section.node[data-node="`+n1.Name+`"] .bar-row[data-kind="cpu"] .bar`),
		visible(`section.node[data-node="`+n2.Name+`"] .bar-row[data-kind="cpu"] .bar`),
		visible(`section.node[data-node="`+n3.Name+`"] .bar-row[data-kind="cpu"] .bar`))
	nodes := eval[[]string](t, ctx, `[...document.querySelectorAll('section.node')].filter(n => n.querySelectorAll('.bar-row[data-kind="cpu"] .bar, .bar-row[data-kind="ram"] .bar').length == 2).map(n => n.dataset.node)`)
	assert.ElementsMatch(t, []string{n1.Name, n2.Name, n3.Name}, nodes, "three nodes with a CPU and a RAM bar")
	assert.Equal(t, "admin · admin", eval[string](t, ctx, `document.getElementById('whoami').textContent`))
	// Healthy drivers say what they are plainly; only a driver in trouble
	// is shown as a warning (every test and docker driver was).
	assert.Empty(t, eval[[]string](t, ctx, `[...document.querySelectorAll('.driver h3 .warn')].map(w => w.textContent)`), "no warning for a healthy driver")
	assert.Equal(t, []string{" · test driver: fake machines, capacity from its config, not this host's"},
		eval[[]string](t, ctx, `[...new Set([...document.querySelectorAll('.driver h3 .status')].map(w => w.textContent))]`))
	shot(t, ctx, dir, "fleet")

	// A claim made in the page turns Bound without a reload.
	eval[bool](t, ctx, `window.notReloaded = true`)
	do(t, ctx, "create a claim", click(`#nav a[data-page="claims"]`),
		chromedp.WaitReady(chromedp.CSS(`#new-claim-template option[value="small"]`)),
		chromedp.SetValue(chromedp.ID("new-claim-template"), "small"),
		click(`#new-claim button[type="submit"]`),
		visible(`tr[data-claim^="small-"][data-phase="Bound"]`))
	assert.True(t, eval[bool](t, ctx, `window.notReloaded === true`), "the page was not reloaded: the stream brought the phase")
	claimNode := eval[string](t, ctx, `document.querySelector('tr[data-claim^="small-"]').children[5].textContent`)
	assert.Contains(t, []string{n1.Name, n2.Name, n3.Name}, claimNode)
	shot(t, ctx, dir, "claims")

	// A claim that fits no node waits, and the page says why; the phase
	// filter keeps it alone.
	n1.create(`
kind: MachineTemplate
metadata: {name: huge}
spec:
  resources: {cpu: 64, ramGB: 2}
  providerConfiguration: {test: {}}
---
kind: MachineClaim
metadata: {name: huge-1}
spec: {machineTemplate: huge}
`)
	do(t, ctx, "the waiting claim's reason", visible(`tr[data-claim="huge-1"][data-phase="Requested"]`),
		poll(`document.querySelector('tr[data-claim="huge-1"] td.reason').textContent.length > 0`))
	t.Logf("reason shown: %s", eval[string](t, ctx, `document.querySelector('tr[data-claim="huge-1"] td.reason').textContent`))
	eval[bool](t, ctx, `(() => { const f = document.getElementById('filter-phase'); f.value = 'Requested'; f.dispatchEvent(new Event('input')); return true })()`)
	assert.Equal(t, []string{"huge-1"}, eval[[]string](t, ctx, `[...document.querySelectorAll('tr[data-claim]')].map(r => r.dataset.claim)`))
	shot(t, ctx, dir, "claims-waiting")

	// The small claim's machine, with its node.
	do(t, ctx, "machines", click(`#nav a[data-page="machines"]`), visible(`tr[data-machine]`))
	shot(t, ctx, dir, "machines")
	// Its output, fetched from its node through this one.
	do(t, ctx, "machine output", click(`tr[data-machine] button.logs`), visible(`#machine-logs pre.logs`),
		poll(`document.querySelector('#machine-logs pre.logs').textContent.includes('has no output of its own')`))
	shot(t, ctx, dir, "machine-output")

	// A pool made now fills while the page watches.
	do(t, ctx, "pools page", click(`#nav a[data-page="sets"]`))
	n3.create(`
kind: MachineSet
metadata: {name: warm-pool}
spec:
  availabilityConfiguration: {availability: Pool}
  provisioningStrategy: AutoScale
  machineTemplate: warm
  minAvailable: 3
  maxProvisioned: 4
`)
	do(t, ctx, "the pool fills", visible(`section.set[data-set="warm-pool"]`), poll(
		`document.querySelector('section.set[data-set="warm-pool"] .bar-text').textContent == "provisioned 3 / max 4 · available 3 (min 3)"`))
	shot(t, ctx, dir, "pool")

	// The fleet again: one 1-CPU claim and three 2-CPU pool machines, as
	// the nodes report them.
	do(t, ctx, "the bars add up to 7 CPUs used", click(`#nav a[data-page="fleet"]`),
		poll(`[...document.querySelectorAll('.bar-row[data-kind="cpu"] .bar')].reduce((s, b) => s + Number(b.getAttribute('aria-valuenow')), 0) == 7`))
	shot(t, ctx, dir, "fleet-used")

	// A drained node shows as such, live.
	n1.mustCLI("node", "drain", n3.Name)
	do(t, ctx, "n3 drained", visible(`section.node.state-drained[data-node="`+n3.Name+`"]`))
	shot(t, ctx, dir, "fleet-drained")

	// An event's timeline, a code and a session.
	now := time.Now().UTC().Truncate(time.Minute)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	n2.create(`
kind: ScheduledEvent
metadata: {name: workshop}
spec:
  displayName: Friday workshop
  startTime: ` + at(2*time.Hour) + `
  endTime: ` + at(5*time.Hour) + `
  requiredMachines: [{machineTemplate: small, count: 2}]
---
kind: ScheduledEvent
metadata: {name: lab}
spec:
  startTime: ` + at(-time.Hour) + `
  provisioningStartTime: ` + at(-2*time.Hour) + `
  endTime: ` + at(time.Hour) + `
  requiredMachines: [{machineTemplate: small, count: 1}]
---
kind: AccessCode
metadata: {name: workshop-code}
spec:
  code: friday-secret
  scheduledEvents: [workshop]
  notBefore: ` + at(-time.Hour) + `
  notAfter: ` + at(24*time.Hour) + `
---
kind: Session
metadata: {name: alice-intro}
spec: {user: alice, machineTemplate: small, onEnd: Pause, timeout: 2s}
---
kind: Session
metadata: {name: alice-later}
spec: {user: alice}
`)
	do(t, ctx, "events", click(`#nav a[data-page="events"]`),
		visible(`.tl-row[data-event="workshop"] .tl-run`), visible(`.tl-row[data-event="lab"] .tl-run`))
	shot(t, ctx, dir, "events")
	do(t, ctx, "codes and sessions", click(`#nav a[data-page="access"]`),
		visible(`tr[data-code="workshop-code"]`), visible(`tr[data-session="alice-intro"]`),
		visible(`tr[data-session="alice-later"] .reason`))
	assert.Contains(t, eval[string](t, ctx, `document.querySelector('tr[data-session="alice-later"] .reason').textContent`),
		"set spec.machineTemplate", "a session without a claim says why")
	assert.NotContains(t, eval[string](t, ctx, `document.body.textContent`), "friday-secret", "the page never shows a code's secret")
	shot(t, ctx, dir, "access")

	// Alice, a user, signs in on a phone-sized screen: her claims only.
	do(t, ctx, "alice on a phone", click(`#signout`),
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		signIn(n1.API, tok.Token),
		click(`#nav a[data-page="claims"]`),
		chromedp.WaitReady(chromedp.CSS(`#new-claim-template option[value="small"]`)),
		chromedp.SetValue(chromedp.ID("new-claim-template"), "small"),
		click(`#new-claim button[type="submit"]`),
		visible(`tr[data-claim^="small-"][data-phase="Bound"]`))
	rows := eval[[]string](t, ctx, `[...new Set([...document.querySelectorAll('tr[data-claim]')].map(r => r.children[1].textContent))]`)
	assert.Equal(t, []string{"alice"}, rows, "the admin's claim is not alice's to see (her session's may be there)")
	shot(t, ctx, dir, "phone-claims")
	// The machine of the claim she just made is there: its stream sent it
	// once her claim named it (its own events came before, when it was
	// not hers to see).
	do(t, ctx, "alice's machines", click(`#nav a[data-page="machines"]`), visible(`tr[data-machine]`),
		poll(`[...document.querySelectorAll('tr[data-machine]')].some(r => r.children[5].textContent.startsWith('small-'))`))
	mine := eval[[]string](t, ctx, `[...document.querySelectorAll('tr[data-machine]')].map(r => r.children[5].textContent)`)
	claims := eval[[]string](t, ctx, `[...state.objs.MachineClaim.keys()]`)
	assert.NotEmpty(t, mine)
	assert.Subset(t, claims, mine, "every machine shown is bound to one of alice's claims")
	// Her session ended without keepalives and paused its machine: the
	// table says so.
	do(t, ctx, "alice's paused machine", visible(`tr[data-machine] .badge.phase-paused`))
	shot(t, ctx, dir, "phone-machines")
	do(t, ctx, "alice's fleet", click(`#nav a[data-page="fleet"]`), visible(`section.node .bar`))
	shot(t, ctx, dir, "phone-fleet")
}

// TestDashboardShowsUnreachableNodes: of three nodes two are killed with
// SIGKILL while the page, served by the third, is open. That node reaches
// no majority, so it passes no verdict and its records keep the other two
// Up; no record changes, and yet the page shows them unreachable, with
// why, without a reload: the event stream sends a node again when the
// streaming node's view of it moves.
func TestDashboardShowsUnreachableNodes(t *testing.T) {
	exe := chromium(t)
	const cfg = "drivers:\n  - name: test\n    config: {cpus: 2, ram_gb: 4}\n"
	a := startWithConfig(t, "", cfg)
	b := startWithConfig(t, "", cfg, "--join", a.Gossip)
	c := startWithConfig(t, "", cfg, "--join", a.Gossip)
	waitUp(t, a, b, c)

	dir := screenshotDir(t)
	ctx := browser(t, exe)
	card := func(p *proc) string { return `section.node[data-node="` + p.Name + `"]` }
	do(t, ctx, "sign in, see the fleet", signIn(a.API, a.Token),
		visible(card(a)+`[data-reachable="true"]`), visible(card(b)+`[data-reachable="true"]`), visible(card(c)+`[data-reachable="true"]`))
	assert.Zero(t, eval[int](t, ctx, `document.querySelectorAll('section.node .phase-unreachable').length`), "every node is reached")
	eval[bool](t, ctx, `window.notReloaded = true`)

	b.kill()
	c.kill()
	shown := func(p *proc) string {
		return `document.querySelector('` + card(p) + `.unreachable[data-reachable="false"] .badge.phase-unreachable') !== null`
	}
	do(t, ctx, "b and c unreachable", poll(shown(b)), poll(shown(c)))
	for _, p := range []*proc{b, c} {
		badges := eval[[]string](t, ctx, `[...document.querySelectorAll('`+card(p)+` h2 .badge')].map(b => b.textContent)`)
		assert.Equal(t, []string{"Up", "Unreachable"}, badges, "%s: the phase is the record's, Up; the badge is a's view", p.Name)
		why := eval[string](t, ctx, `document.querySelector('`+card(p)+` .unreachable-why').textContent`)
		assert.Contains(t, why, "reaches 1 of the 3 members it knows, no majority", p.Name)
	}
	assert.Equal(t, "true", eval[string](t, ctx, `document.querySelector('`+card(a)+`').dataset.reachable`), "a reaches itself")
	assert.True(t, eval[bool](t, ctx, `window.notReloaded === true`), "the page was not reloaded: the stream brought the view")
	assert.Equal(t, "live", eval[string](t, ctx, `document.getElementById('live').dataset.state`))
	shot(t, ctx, dir, "fleet-unreachable")
}
