package config_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/config"
	"github.com/hf-fleet/hf/lib/types"
)

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		env     []string
		args    []string
		want    []string // substrings of the error
		is      error    // errors.Is target; nil = types.ErrInvalid
	}{
		// unknown keys
		{name: "unknown nested key", content: "cluster:\n  jion: [a]\n",
			want: []string{`config: unknown key "cluster.jion"`, "line 2", `did you mean "cluster.join"?`}, is: config.ErrUnknownKey},
		{name: "unknown top-level key", content: "nmae: x\n",
			want: []string{`unknown key "nmae"`, `did you mean "name"?`}, is: config.ErrUnknownKey},
		{name: "keys are case-sensitive", content: "Data_Dir: /x\n",
			want: []string{`unknown key "Data_Dir"`, `did you mean "data_dir"?`}, is: config.ErrUnknownKey},
		{name: "camelCase is not snake_case", content: "scheduler: {bindTimeout: 1m}\n",
			want: []string{`unknown key "scheduler.bindTimeout"`}, is: config.ErrUnknownKey},
		{name: "unknown key in a list element", content: "drivers:\n- name: test\n- nmae: docker\n",
			want: []string{`unknown key "drivers[1].nmae"`, "line 3", `did you mean "drivers[1].name"?`}, is: config.ErrUnknownKey},
		{name: "unknown key in a token", content: "api: {tokens: [{name: a, tokn: x}]}\n",
			want: []string{`unknown key "api.tokens[0].tokn"`}, is: config.ErrUnknownKey},
		{name: "every unknown key is reported", content: "foo: 1\nbar: 2\n",
			want: []string{`unknown key "bar"`, `unknown key "foo"`}, is: config.ErrUnknownKey},

		// shapes and types
		{name: "section given a scalar", content: "cluster: 5\n", want: []string{"config: cluster: must be a mapping of keys, got the number 5"}},
		{name: "drivers not a list", content: "drivers: {name: test}\n", want: []string{"config: drivers: must be a list"}},
		{name: "labels not a mapping", content: "labels: [a]\n", want: []string{"config: labels: must be a mapping"}},
		{name: "mapping for a list", content: "cluster: {join: {a: b}}\n", want: []string{"config: cluster.join: must be a list, got a mapping"}},
		{name: "string for a list", content: "api:\n  tls_hosts: x\n", want: []string{`config: api.tls_hosts: must be a list, got the string "x"`, "line 2"}},
		{name: "comma-separated string for a list", content: "cluster: {join: 'a.example.com, b:7701'}\n",
			want: []string{`config: cluster.join: must be a list, got the string "a.example.com, b:7701"`}},
		{name: "mapping in a list", content: "cluster: {join: [{a: b}]}\n", want: []string{"config: cluster.join[0]: must be a string, got a mapping"}},
		{name: "bad int", content: "cluster: {suspicion_mult: lots}\n", want: []string{`config: cluster.suspicion_mult: must be a whole number, got the string "lots" (`, "line 1)"}},
		{name: "bad int from env", env: []string{"HF_CLUSTER_SUSPICION_MULT=four"},
			want: []string{"config: cluster.suspicion_mult:", "(from HF_CLUSTER_SUSPICION_MULT)"}},
		{name: "number for a bool", content: "api: {plain_http: 5}\n", want: []string{"config: api.plain_http: must be true or false, got the number 5", "line 1"}},
		{name: "bool for a number", content: "cluster: {fanout: true}\n", want: []string{"config: cluster.fanout: must be a whole number, got true"}},
		{name: "bool for a fraction", content: "scheduler: {min_cpu: true}\n", want: []string{"config: scheduler.min_cpu: must be a number, got true"}},
		{name: "fraction for a whole number", content: "scheduler: {max_rebinds: 2.7}\n", want: []string{"config: scheduler.max_rebinds: must be a whole number, got the number 2.7"}},
		{name: "quoted whole number", content: "scheduler:\n  max_rebinds: \"5\"\n",
			want: []string{`config: scheduler.max_rebinds: must be a whole number, got the string "5": write it without quotes (`, "hf.yml line 2)"}},
		{name: "quoted number", content: "api: {user_writes_per_second: '2.5'}\n",
			want: []string{`config: api.user_writes_per_second: must be a number, got the string "2.5": write it without quotes`}},
		{name: "quoted bool", content: "store: {sync_writes: \"true\"}\n",
			want: []string{`config: store.sync_writes: must be true or false, got the string "true": write it without quotes`}},
		{name: "yes is no bool", content: "api: {plain_http: yes}\n",
			want: []string{`config: api.plain_http: must be true or false, got the string "yes" (`}},
		{name: "empty string for a number", content: "cluster: {fanout: ''}\n",
			want: []string{`config: cluster.fanout: must be a whole number, got the string "" (`}},
		{name: "bad duration", content: "scheduler:\n  bind_timeout: 5 minutes\n",
			want: []string{`config: scheduler.bind_timeout: invalid duration "5 minutes"`, "line 2"}},
		{name: "bare number duration", content: "scheduler: {bind_timeout: 300}\n",
			want: []string{`config: scheduler.bind_timeout: invalid duration 300: add a unit, e.g. "300s"`}},
		{name: "bad duration from env", env: []string{"HF_STORE_GC_INTERVAL=often"},
			want: []string{`config: store.gc_interval: invalid duration "often"`, "(from HF_STORE_GC_INTERVAL)"}},
		{name: "mapping for a string", content: "name: {a: b}\n", want: []string{"config: name: must be a string"}},

		// values
		{name: "bad profile", content: "cluster: {profile: moon}\n",
			want: []string{`config: cluster.profile: must be one of local, lan, wan, got "moon"`}},
		{name: "bad profile from env", env: []string{"HF_CLUSTER_PROFILE=moon"},
			want: []string{"config: cluster.profile: must be one of local, lan, wan", "(from HF_CLUSTER_PROFILE)"}},
		{name: "bad placement", env: []string{"HF_SCHEDULER_PLACEMENT=random"},
			want: []string{"config: scheduler.placement: must be one of pack, spread"}},
		{name: "bad log level from flag", args: []string{"--log-level", "loud"},
			want: []string{"config: log.level: must be one of debug, info, warn, error", "(from --log-level)"}},
		{name: "bad log format", content: "log: {format: xml}\n", want: []string{"config: log.format: must be one of text, json"}},
		{name: "api address without port", content: "api: {address: localhost}\n",
			want: []string{`config: api.address: must be host:port, got "localhost"`, "line 1"}},
		{name: "api address port out of range", args: []string{"--api", "127.0.0.1:70000"},
			want: []string{"config: api.address: port must be a number from 0 to 65535", "(from --api)"}},
		{name: "api address named port", content: "api: {address: 'localhost:http'}\n", want: []string{"config: api.address: port must be a number"}},
		{name: "api address bad host", content: "api: {address: 'bad host:80'}\n", want: []string{"config: api.address: host must be an IP address or a DNS name"}},
		{name: "gossip bind", args: []string{"--gossip", "nope"}, want: []string{"config: cluster.bind: must be host:port"}},
		{name: "advertise needs a host", content: "cluster: {advertise: ':7701'}\n", want: []string{"config: cluster.advertise: needs a host"}},
		{name: "advertise port 0", content: "cluster: {advertise: '10.0.0.1:0'}\n", want: []string{"config: cluster.advertise: port must be a number from 1 to 65535"}},
		{name: "bad join entry", args: []string{"--join", "10.0.0.1:7701,bad/host"},
			want: []string{`config: cluster.join[1]: must be host or host:port, got "bad/host"`, "(from --join)"}},
		{name: "bad join entry in file", content: "cluster:\n  join:\n    - 10.0.0.1\n    - 'x:99999'\n",
			want: []string{"config: cluster.join[1]: port must be a number from 1 to 65535", "line 4"}},
		{name: "cluster key not base64", env: []string{"HF_CLUSTER_KEY=not base64!"}, want: []string{"config: cluster.key: must be base64 of 16, 24 or 32 bytes"}},
		{name: "cluster key wrong length", content: "cluster: {key: 'c2hvcnQ='}\n", want: []string{"config: cluster.key: must be base64 of 16, 24 or 32 bytes"}},
		{name: "cluster label too long", content: "cluster: {label: " + strings.Repeat("x", 256) + "}\n", want: []string{"config: cluster.label: must be at most 255 bytes"}},
		{name: "probe timeout not below interval", content: "cluster: {probe_interval: 1s, probe_timeout: 1s}\n",
			want: []string{"config: cluster.probe_timeout: must be less than cluster.probe_interval"}},
		{name: "negative write rate", content: "api: {user_writes_per_second: -1}\n", want: []string{"config: api.user_writes_per_second: must be a number, 0 (no limit) or more, got -1"}},
		{name: "write rate not a number", content: "api: {user_writes_per_second: fast}\n", want: []string{"api.user_writes_per_second"}},
		{name: "negative timing", content: "cluster: {gossip_interval: -1s}\n", want: []string{"config: cluster.gossip_interval: must not be negative"}},
		{name: "zero rejoin interval", content: "cluster: {rejoin_interval: 0s}\n", want: []string{"config: cluster.rejoin_interval: must be a positive duration"}},
		{name: "zero lost grace", content: "scheduler: {lost_grace: 0}\n", want: []string{"config: scheduler.lost_grace: must be a positive duration"}},
		{name: "offer timeout not below bind timeout", content: "scheduler: {offer_timeout: 5m}\n", want: []string{"config: scheduler.offer_timeout: must be less than scheduler.bind_timeout"}},
		{name: "tombstone ttl shorter than anti-entropy", content: "store: {tombstone_ttl: 10s}\n", want: []string{"config: store.tombstone_ttl: must be longer than cluster.anti_entropy_interval"}},
		{name: "tombstone min age below the resume window", content: "store: {tombstone_min_age: 30s}\n", want: []string{"config: store.tombstone_min_age: must be at least api.resume_window"}},
		{name: "tombstone min age past the ttl", content: "store: {tombstone_min_age: 25h}\n", want: []string{"config: store.tombstone_min_age: must not be longer than store.tombstone_ttl"}},
		{name: "bad name", args: []string{"--name", "Node_1"}, want: []string{"config: name: must be lower-case letters", "(from --name)"}},
		{name: "bad label key", content: "labels: {'-x': a}\n", want: []string{"config: labels.-x: bad label key", "line 1"}},
		{name: "bad label key with brackets", content: "labels: {'x]': a, 'y[': b}\n", want: []string{"bad label key"}},
		{name: "bad label value from flag", args: []string{"--label", "zone=a b"}, want: []string{`config: labels.zone: bad label value "a b"`, "(from --label)"}},
		{name: "label flag without value", args: []string{"--label", "zone"}, want: []string{`config: labels: want key=value, got "zone"`, "(from --label)"}},
		{name: "bad HF_LABELS", env: []string{"HF_LABELS=a=1,=2"}, want: []string{`config: labels: want key=value, got "=2"`, "(from HF_LABELS)"}},
		{name: "drivers from env", env: []string{"HF_DRIVERS=x", "HF_API_TOKENS=x"},
			want: []string{"config: api.tokens: is a list of mappings, which only the config file can set (from HF_API_TOKENS)",
				"\nconfig: drivers: is a list of mappings, which only the config file can set (from HF_DRIVERS)"}},
		{name: "a section's name", env: []string{"HF_API=x", "HF_CLUSTER=x", "HF_LOG=debug"},
			want: []string{"config: HF_API names the section api, which the environment sets key by key: HF_API_ADDRESS, HF_API_ADMIN_TOKEN, HF_API_CORS_ORIGINS,",
				"\nconfig: HF_CLUSTER names the section cluster, which the environment sets key by key: HF_CLUSTER_ADVERTISE, HF_CLUSTER_ANTI_ENTROPY_INTERVAL,",
				"\nconfig: HF_LOG names the section log, which the environment sets key by key: HF_LOG_FORMAT, HF_LOG_LEVEL"},
			is: config.ErrUnknownKey},
		{name: "a near miss of a section's variable", env: []string{"HF_API_ADRESS=127.0.0.1:7700", "HF_CLUSTER_JION=10.0.0.1", "HF_SCHEDULER_MAX_REBIND=5", "HF_DEBUG_PPROF_ADRESS=x"},
			want: []string{"config: unknown variable HF_API_ADRESS of the api section; did you mean HF_API_ADDRESS?",
				"\nconfig: unknown variable HF_CLUSTER_JION of the cluster section; did you mean HF_CLUSTER_JOIN?",
				"\nconfig: unknown variable HF_DEBUG_PPROF_ADRESS of the debug section; did you mean HF_DEBUG_PPROF_ADDRESS?",
				"\nconfig: unknown variable HF_SCHEDULER_MAX_REBIND of the scheduler section; did you mean HF_SCHEDULER_MAX_REBINDS?"},
			is: config.ErrUnknownKey},
		{name: "a near miss of a list of mappings", env: []string{"HF_API_TOKEMS=x"},
			want: []string{"config: unknown variable HF_API_TOKEMS of the api section; did you mean HF_API_TOKENS?"}, is: config.ErrUnknownKey},
		{name: "short admin token", env: []string{"HF_ADMIN_TOKEN=short"},
			want: []string{"config: api.admin_token: must be at least 16 characters", "(from HF_ADMIN_TOKEN)"}},
		{name: "plain http off loopback", content: "api: {address: \"0.0.0.0:7700\", plain_http: true}\n",
			want: []string{`config: api.plain_http: plain HTTP is allowed only on a loopback api.address, not "0.0.0.0:7700"`}},
		{name: "cors origin with a path", content: "api: {cors_origins: [\"https://ui.example\", \"https://ui.example/app\"]}\n",
			want: []string{`config: api.cors_origins[1]: want an origin scheme://host[:port] (no path) or *, got "https://ui.example/app"`}},
		{name: "tls host not a name", content: "api:\n  tls_hosts: [hf.example.com, 'bad host!']\n",
			want: []string{`config: api.tls_hosts[1]: want a DNS name (its first label may be *) or an IP address, got "bad host!"`, "line 2"}},
		{name: "tls host with a trailing dot", content: "api: {tls_hosts: [hf.example.com.]}\n", want: []string{`config: api.tls_hosts[0]: want a DNS name`}},
		{name: "tls host with a port", content: "api: {tls_hosts: ['hf.example.com:443']}\n", want: []string{`config: api.tls_hosts[0]: want a DNS name`}},
		{name: "tls host an address with a zone", env: []string{"HF_API_TLS_HOSTS=hf.example.com,fe80::1%eth0"},
			want: []string{`config: api.tls_hosts[1]: want a DNS name (its first label may be *) or an IP address, got "fe80::1%eth0" (from HF_API_TLS_HOSTS)`}},
		{name: "resume window", content: "api: {resume_window: 0s}\n",
			want: []string{`config: api.resume_window:`}},
		{name: "shell keepalive", content: "api: {shell_keepalive: 0s}\n",
			want: []string{`config: api.shell_keepalive: must be a positive duration`}},
		{name: "shell keepalive too long", content: "api: {shell_keepalive: 100h}\n",
			want: []string{`config: api.shell_keepalive: must be at most 5m0s (a client gone is noticed within about two of these), got 100h0m0s`, "line 1"}},
		{name: "shell keepalive too long from env", env: []string{"HF_API_SHELL_KEEPALIVE=5m1s"},
			want: []string{`config: api.shell_keepalive: must be at most 5m0s`, "got 5m1s (from HF_API_SHELL_KEEPALIVE)"}},
		{name: "token role", content: "api: {tokens: [{name: ci, token: 0123456789abcdef, role: root}]}\n",
			want: []string{`config: api.tokens[0].role: must be one of admin, operator, user, got "root"`}},
		{name: "token name", content: "api: {tokens: [{token: 0123456789abcdef, role: user}]}\n",
			want: []string{"config: api.tokens[0].name: is required"}},
		{name: "short token", content: "api: {tokens: [{name: ci, token: abc, role: user}]}\n",
			want: []string{"config: api.tokens[0].token: must be at least 16 characters"}},
		{name: "duplicate token name", content: "api: {tokens: [{name: ci, token: 0123456789abcdef, role: user}, {name: ci, token: 0123456789abcdeg, role: user}]}\n",
			want: []string{`config: api.tokens[1].name: name "ci" is already used by api.tokens[0]`}},
		{name: "token same as admin token", content: "api: {admin_token: 0123456789abcdef, tokens: [{name: ci, token: 0123456789abcdef, role: user}]}\n",
			want: []string{"config: api.tokens[0].token: same token as api.admin_token"}},
		{name: "duplicate driver instance", content: "drivers:\n- {name: docker, instance: d1}\n- {name: test, instance: d1}\n",
			want: []string{`config: drivers[1].instance: instance name "d1" is already used by drivers[0]`, "line 3"}},
		{name: "duplicate default instance", content: "drivers: [{name: test}, {name: test}]\n",
			want: []string{`config: drivers[1].instance: instance name "test" is already used by drivers[0]`, "line 1"}},
		{name: "driver without name", content: "drivers: [{config: {a: 1}}]\n", want: []string{"config: drivers[0].name: is required"}},
		{name: "bad driver instance", content: "drivers: [{name: docker, instance: 'docker//x'}]\n", want: []string{"config: drivers[0].instance: must be DNS labels"}},
		{name: "driver config not JSON-able", content: "drivers: [{name: test, config: {x: .nan}}]\n", want: []string{"config: drivers[0].config: cannot be passed to the driver as JSON"}},
		{name: "all problems at once", content: "log: {level: loud, format: xml}\n",
			want: []string{"config: log.level:", "\nconfig: log.format:"}},

		// a value a later layer overrides is checked all the same
		{name: "file type under a flag", content: "api: {address: [1, 2]}\n", args: []string{"--api", "127.0.0.1:0"},
			want: []string{"config: api.address: must be a string, got a list (", "hf.yml line 1, overridden by --api)"}},
		{name: "file type under env", content: "cluster:\n  suspicion_mult: lots\n", env: []string{"HF_CLUSTER_SUSPICION_MULT=4"},
			want: []string{`config: cluster.suspicion_mult: must be a whole number, got the string "lots" (`, "hf.yml line 2, overridden by HF_CLUSTER_SUSPICION_MULT)"}},
		{name: "quoted number under a flag", content: "memory_limit_mb: '512'\napi: {tls_hosts: x}\n", env: []string{"HF_API_TLS_HOSTS=a.example.com"}, args: []string{"--name", "n1"},
			want: []string{`config: memory_limit_mb: must be a whole number, got the string "512": write it without quotes (`, "hf.yml line 1)",
				`config: api.tls_hosts: must be a list, got the string "x" (`, "hf.yml line 2, overridden by HF_API_TLS_HOSTS)"}},
		{name: "file value under env and a flag", content: "api: {address: localhost}\n",
			env: []string{"HF_API_ADDRESS=127.0.0.1:0"}, args: []string{"--api", "127.0.0.1:0"},
			want: []string{`config: api.address: must be host:port, got "localhost" (`, "hf.yml line 1, overridden by --api)"}},
		{name: "env value under a flag", env: []string{"HF_LOG_LEVEL=loud"}, args: []string{"--log-level", "debug"},
			want: []string{`config: log.level: must be one of debug, info, warn, error, got "loud" (from HF_LOG_LEVEL, overridden by --log-level)`}},
		{name: "file list entry under a flag", content: "cluster:\n  join: ['x:99999']\n", args: []string{"--join", "10.0.0.1"},
			want: []string{"config: cluster.join[0]: port must be a number from 1 to 65535", "hf.yml line 2, overridden by --join)"}},
		{name: "file label under a flag", content: "labels: {zone: a b}\n", args: []string{"--label", "zone=b"},
			want: []string{`config: labels.zone: bad label value "a b"`, "hf.yml line 1, overridden by --label)"}},
		{name: "env label under a flag", env: []string{"HF_LABELS=zone=a b"}, args: []string{"--label", "zone=b"},
			want: []string{`config: labels.zone: bad label value "a b"`, "(from HF_LABELS, overridden by --label)"}},

		// the file itself
		{name: "YAML syntax error names the file", content: "cluster:\n  join: [a\n", want: []string{"config: parse ", "hf.yml", "yaml:"}, is: errNoSentinel},
		{name: "duplicate key", content: "name: a\nname: b\n", want: []string{"hf.yml: line 2: key \"name\" is already defined at line 1"}, is: errNoSentinel},
		{name: "two documents", content: "name: a\n---\nname: b\n", want: []string{"one YAML document"}, is: errNoSentinel},
		{name: "top level a list", content: "- a\n- b\n", want: []string{"the top level must be a mapping"}, is: errNoSentinel},
		{name: "alias bomb", content: aliasBomb(), want: []string{"expands to more than"}, is: errNoSentinel},
		{name: "self-referencing anchor", content: "a: &a [x, *a]\n", want: []string{`anchor "a" refers to itself`}, is: errNoSentinel},
		{name: "self-merging anchor", content: "a: &a\n  <<: *a\n", want: []string{"hf.yml: line 2: anchor \"a\" refers to itself"}, is: errNoSentinel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.content, tt.env, tt.args)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			switch tt.is {
			case errNoSentinel:
			case nil:
				assert.ErrorIs(t, err, types.ErrInvalid)
				var fe *types.FieldError
				assert.ErrorAs(t, err, &fe)
			default:
				assert.ErrorIs(t, err, tt.is)
			}
		})
	}
}

// errNoSentinel marks cases whose error wraps no sentinel (file syntax).
var errNoSentinel = errors.New("no sentinel")

// aliasBomb is a "billion laughs" document.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("a: &a [x, x, x, x, x, x, x, x, x, x]\n")
	prev := "a"
	for i := range 8 {
		name := string(rune('b' + i))
		b.WriteString(name + ": &" + name + " [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*" + prev)
		}
		b.WriteString("]\n")
		prev = name
	}
	return b.String()
}

func TestLoadMissingFile(t *testing.T) {
	tests := []struct {
		name string
		opts config.LoadOptions
	}{
		{"named by File", config.LoadOptions{File: "/nonexistent/hf.yml", Env: testEnv}},
		{"named by HF_CONFIG", config.LoadOptions{Env: append([]string{"HF_CONFIG=/nonexistent/hf.yml"}, testEnv...)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(tt.opts)
			require.Error(t, err)
			assert.ErrorIs(t, err, fs.ErrNotExist)
			assert.Contains(t, err.Error(), "config: read /nonexistent/hf.yml")
		})
	}
}

// api.shell_keepalive takes up to MaxShellKeepalive; 100h was accepted,
// and left a shell whose client was killed running for days.
func TestShellKeepaliveBound(t *testing.T) {
	for _, d := range []string{"100ms", "250ms", "10s", "5m"} {
		c, err := load(t, "api: {shell_keepalive: "+d+"}\n", nil, nil)
		require.NoError(t, err, d)
		want, err := time.ParseDuration(d)
		require.NoError(t, err)
		assert.Equal(t, want, c.API.ShellKeepalive, d)
	}
	_, err := load(t, "api: {shell_keepalive: 5m1s}\n", nil, nil)
	assert.ErrorContains(t, err, "config: api.shell_keepalive: must be at most 5m0s")
	for _, d := range []string{"1ns", "99ms"} {
		_, err = load(t, "api: {shell_keepalive: "+d+"}\n", nil, nil)
		assert.ErrorContains(t, err, "config: api.shell_keepalive: must be at least 100ms", d)
	}
}
