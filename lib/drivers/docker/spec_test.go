package docker

import (
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

var testLabels = labels{ns: "hf", node: "node-a", instance: "docker"}

func TestBuildSpec(t *testing.T) {
	tmpl := template("web", types.Resources{CPU: 1.5, RAMGB: 0.5, DiskGB: 10}, nil)
	tmpl.Spec.ConnectProtocols = []string{"http"}
	tc := TemplateConfig{
		Image:      ImageRef{Tag: "hf/web:1"},
		Command:    []string{"serve", "--port", "8080"},
		Entrypoint: []string{"/bin/app"},
		Env:        map[string]string{"MODE": "lab", "HF_USER": "template-value"},
		Ports:      []string{"8080/tcp", "53/udp"},
		Volumes:    []string{"/data"},
	}
	tmpl.Spec.ClaimMetadata = []types.MetadataKey{{Name: "LEVEL"}, {Name: "MODE"}}
	meta := map[string]string{"HF_CLAIM": "c1", "HF_MACHINE": "m-1", "HF_USER": "alice", "LEVEL": "2", "MODE": "claim",
		"LD_PRELOAD": "/evil.so", "undeclared": "x"}
	spec, err := buildSpec(tmpl, tc, meta, specInput{Labels: testLabels, Network: "hf", ImageID: "sha256:abc", Suffix: "0a0b0c0d",
		User: "65534:65534", PidsLimit: 100})
	require.NoError(t, err)

	assert.Equal(t, "hf-m-1-0a0b0c0d", spec.Name)
	cfg := spec.Config
	assert.Equal(t, "sha256:abc", cfg.Image)
	assert.Equal(t, []string{"serve", "--port", "8080"}, []string(cfg.Cmd))
	assert.Equal(t, []string{"/bin/app"}, []string(cfg.Entrypoint))
	assert.Equal(t, []string{"HF_CLAIM=c1", "HF_MACHINE=m-1", "HF_USER=alice", "LEVEL=2", "MODE=lab"}, cfg.Env,
		"sorted; declared claim keys only, the template's env wins over them and the node's HF_* keys over both")
	assert.Equal(t, map[string]string{
		"hf.node":      "node-a",
		"hf.instance":  "docker",
		"hf.machine":   "m-1",
		"hf.claim":     "c1",
		"hf.template":  "web",
		"hf.image":     "hf/web:1",
		"hf.resources": `{"cpu":1.5,"ramGB":0.5,"diskGB":10}`,
		"hf.endpoints": `[{"port":"8080/tcp","protocol":"http"},{"port":"53/udp","protocol":"udp"}]`,
	}, cfg.Labels)
	assert.Equal(t, nat.PortSet{"8080/tcp": {}, "53/udp": {}}, cfg.ExposedPorts)

	hc := spec.HostConfig
	assert.Equal(t, int64(1_500_000_000), hc.NanoCPUs)
	assert.Equal(t, int64(512<<20), hc.Memory)
	assert.Equal(t, int64(512<<20), hc.MemorySwap, "no swap on top of the memory limit")
	assert.False(t, hc.Privileged)
	assert.Equal(t, container.NetworkMode("hf"), hc.NetworkMode)
	assert.Equal(t, nat.PortMap{
		"8080/tcp": {{HostIP: "127.0.0.1"}},
		"53/udp":   {{HostIP: "127.0.0.1"}},
	}, hc.PortBindings, "published on loopback only, at a port the engine picks")
	assert.Equal(t, []mount.Mount{{Type: mount.TypeVolume, Target: "/data",
		VolumeOptions: &mount.VolumeOptions{Labels: map[string]string{"hf.node": "node-a", "hf.instance": "docker"}}}}, hc.Mounts)
	assert.Nil(t, spec.Networking)
	assert.Equal(t, "65534:65534", cfg.User)
	assert.Equal(t, []string{"ALL"}, []string(hc.CapDrop), "a user that is not root has no capabilities")
	assert.Equal(t, []string{"no-new-privileges:true"}, hc.SecurityOpt)
	require.NotNil(t, hc.PidsLimit)
	assert.Equal(t, int64(100), *hc.PidsLimit)
}

// A root container (allow_root) keeps the engine's capabilities but gains
// no more; a privileged one is what the node allowed, untouched.
func TestBuildSpecRootAndPrivileged(t *testing.T) {
	for _, tc := range []struct {
		name       string
		user       string
		privileged bool
		capDrop    []string
		secOpt     []string
	}{
		{"nobody", "65534", false, []string{"ALL"}, []string{"no-new-privileges:true"}},
		{"root", "0:0", false, nil, []string{"no-new-privileges:true"}},
		{"privileged", "65534", true, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := buildSpec(template("p", types.Resources{}, nil), TemplateConfig{Image: ImageRef{Tag: "x"}, Privileged: tc.privileged}, nil,
				specInput{Labels: testLabels, Network: "hf", User: tc.user})
			require.NoError(t, err)
			assert.Equal(t, tc.user, spec.Config.User)
			assert.Equal(t, tc.capDrop, []string(spec.HostConfig.CapDrop))
			assert.Equal(t, tc.secOpt, spec.HostConfig.SecurityOpt)
			assert.Nil(t, spec.HostConfig.PidsLimit, "no limit given, none set")
		})
	}
}

func TestBuildSpecMinimal(t *testing.T) {
	tmpl := template("plain", types.Resources{}, nil)
	spec, err := buildSpec(tmpl, TemplateConfig{Image: ImageRef{URL: "http://files/box.tar"}}, nil,
		specInput{Labels: testLabels, Network: "lab", ImageID: "sha256:def"})
	require.NoError(t, err)
	assert.Regexp(t, `^hf-plain-[0-9a-f]{8}$`, spec.Name, "no machine name: the template's, and a random suffix")
	assert.Nil(t, spec.Config.Cmd, "the image's command")
	assert.Nil(t, spec.Config.Entrypoint, "the image's entrypoint")
	assert.Empty(t, spec.Config.Env)
	assert.Nil(t, spec.Config.ExposedPorts)
	assert.Nil(t, spec.HostConfig.PortBindings)
	assert.Zero(t, spec.HostConfig.NanoCPUs, "no cpu in the template: no limit")
	assert.Zero(t, spec.HostConfig.Memory)
	assert.Equal(t, "http://files/box.tar", spec.Config.Labels["hf.image"])
	assert.NotContains(t, spec.Config.Labels, "hf.claim")
	assert.NotContains(t, spec.Config.Labels, "hf.machine")

	// A pool machine names its set in place of a claim.
	pooled, err := buildSpec(tmpl, TemplateConfig{Image: ImageRef{Tag: "x"}}, map[string]string{"HF_MACHINESET": "pool", "HF_MACHINE": "m-2"},
		specInput{Labels: testLabels, Network: "lab"})
	require.NoError(t, err)
	assert.Equal(t, "pool", pooled.Config.Labels["hf.machineset"])
	assert.NotContains(t, pooled.Config.Labels, "hf.claim")
	assert.Contains(t, pooled.Config.Env, "HF_MACHINESET=pool")

	again, err := buildSpec(tmpl, TemplateConfig{Image: ImageRef{Tag: "x"}}, nil, specInput{Labels: testLabels, Network: "lab"})
	require.NoError(t, err)
	assert.NotEqual(t, spec.Name, again.Name)
}

// What a caller passes that the template does not declare, or that could not
// be one KEY=value entry, never reaches the container.
func TestBuildSpecDropsUndeclaredMetadata(t *testing.T) {
	tmpl := template("t", types.Resources{}, nil)
	tmpl.Spec.ClaimMetadata = []types.MetadataKey{{Name: "OK"}}
	spec, err := buildSpec(tmpl, TemplateConfig{Image: ImageRef{Tag: "x"}},
		map[string]string{"A=B": "1", "OK": "yes", "NUL": "a\x00b", "NODE_OPTIONS": "--require /x"},
		specInput{Labels: testLabels, Network: "hf"})
	require.NoError(t, err)
	assert.Equal(t, []string{"OK=yes"}, spec.Config.Env)
}

func TestContainerName(t *testing.T) {
	for _, tc := range []struct{ ns, who, want string }{
		{"hf", "m-1", "hf-m-1-s"},
		{"hf.lab", "machine/with spaces", "hf.lab-machine-with-spaces-s"},
		{"hf", "---", "hf-machine-s"},
		{"hf", strings.Repeat("x", 60), "hf-" + strings.Repeat("x", 40) + "-s"},
	} {
		assert.Equal(t, tc.want, containerName(tc.ns, tc.who, "s"))
	}
}

func TestEndpointProtocol(t *testing.T) {
	p := port{Number: 22, Proto: "tcp"}
	assert.Equal(t, "ssh", endpointProtocol([]string{"ssh"}, 0, p))
	assert.Equal(t, "tcp", endpointProtocol([]string{"ssh"}, 1, p), "more ports than protocols")
	assert.Equal(t, "tcp", endpointProtocol(nil, 0, p))
	assert.Equal(t, "udp", endpointProtocol([]string{""}, 0, port{Number: 53, Proto: "udp"}))
}

func TestResourceOf(t *testing.T) {
	o := observed{
		ID: "c0ffee", Name: "hf-m-1-aa", ImageID: "sha256:abc", State: "running", IP: "172.18.0.2",
		Labels: map[string]string{
			"hf.node": "node-a", "hf.instance": "docker", "hf.image": "hf/web:1",
			"hf.resources": `{"cpu":1.5,"ramGB":0.5}`,
			"hf.endpoints": `[{"port":"8080/tcp","protocol":"http"},{"port":"53/udp","protocol":"udp"},{"port":"9/tcp","protocol":"tcp"}]`,
		},
		Ports: map[string]string{"8080/tcp": "32768", "53/udp": "32769"},
	}
	r := resourceOf("docker", testLabels, o)
	assert.Equal(t, types.Resource{
		ID:     "c0ffee",
		Driver: "docker",
		Info: map[string]string{
			"container_id": "c0ffee", "name": "hf-m-1-aa", "image": "hf/web:1", "image_id": "sha256:abc",
			"ip": "172.18.0.2", "ports": "53/udp=127.0.0.1:32769,8080/tcp=127.0.0.1:32768",
		},
		Endpoints: []types.Endpoint{
			{Protocol: "http", Address: "127.0.0.1:32768"},
			{Protocol: "udp", Address: "127.0.0.1:32769"},
		},
		Resources: types.Resources{CPU: 1.5, RAMGB: 0.5},
	}, r, "a port that is not published (stopped container) has no endpoint")

	bare := resourceOf("docker", testLabels, observed{ID: "x", Labels: map[string]string{}})
	assert.Equal(t, map[string]string{"container_id": "x", "name": "", "image": "", "image_id": ""}, bare.Info)
	assert.Empty(t, bare.Endpoints)
}

func TestFromSummaryAndInspectAgree(t *testing.T) {
	sum := container.Summary{
		ID: "c1", Names: []string{"/hf-x"}, ImageID: "sha256:i", State: "running",
		Labels: map[string]string{"hf.node": "n"},
		Ports: []container.Port{
			{IP: "127.0.0.1", PrivatePort: 8080, PublicPort: 40000, Type: "tcp"},
			{PrivatePort: 9090, Type: "tcp"}, // exposed, not published
		},
		NetworkSettings: &container.NetworkSettingsSummary{Networks: map[string]*network.EndpointSettings{
			"hf": {IPAddress: "172.18.0.5"}, "other": {IPAddress: "10.0.0.9"},
		}},
	}
	ins := container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{ID: "c1", Name: "/hf-x", Image: "sha256:i",
			State: &container.State{Status: "running"}},
		Config: &container.Config{Labels: map[string]string{"hf.node": "n"}},
		NetworkSettings: &container.NetworkSettings{
			NetworkSettingsBase: container.NetworkSettingsBase{Ports: nat.PortMap{
				"8080/tcp": {{HostIP: "127.0.0.1", HostPort: "40000"}},
				"9090/tcp": nil,
			}},
			Networks: map[string]*network.EndpointSettings{"hf": {IPAddress: "172.18.0.5"}},
		},
	}
	want := observed{ID: "c1", Name: "hf-x", ImageID: "sha256:i", State: "running",
		Labels: map[string]string{"hf.node": "n"}, IP: "172.18.0.5", Ports: map[string]string{"8080/tcp": "40000"}}
	assert.Equal(t, want, fromSummary(sum, "hf"))
	assert.Equal(t, want, fromInspect(ins, "hf"))
	assert.Equal(t, observed{Ports: map[string]string{}}, fromInspect(container.InspectResponse{}, "hf"), "empty answer")
}

func TestPhaseOf(t *testing.T) {
	for _, tc := range []struct {
		state string
		code  int
		want  types.MachinePhase
	}{
		{"running", 0, types.MachineRunning},
		{"paused", 0, types.MachineRunning},
		{"created", 0, types.MachineProvisioning},
		{"restarting", 0, types.MachineProvisioning},
		{"removing", 0, types.MachineTerminating},
		{"exited", 0, types.MachineTerminated},
		{"exited", 137, types.MachineFailed},
		{"dead", 0, types.MachineFailed},
		{"something new", 0, types.MachineFailed},
	} {
		t.Run(tc.state, func(t *testing.T) {
			assert.Equal(t, tc.want, phaseOf(tc.state, tc.code))
		})
	}
}

func TestLabelsOwn(t *testing.T) {
	assert.True(t, testLabels.owns(map[string]string{"hf.node": "node-a", "hf.instance": "docker"}))
	assert.False(t, testLabels.owns(map[string]string{"hf.node": "node-b", "hf.instance": "docker"}))
	assert.False(t, testLabels.owns(map[string]string{"hf.node": "node-a", "hf.instance": "docker/big"}))
	assert.False(t, testLabels.owns(map[string]string{"other.node": "node-a", "other.instance": "docker"}))
	assert.False(t, testLabels.owns(nil))
	assert.Equal(t, []string{"hf.node=node-a", "hf.instance=docker"}, testLabels.filter())
}

func TestParseLoadStream(t *testing.T) {
	for _, tc := range []struct {
		name, stream, want, err string
	}{
		{"untagged", `{"stream":"Loaded image ID: sha256:abc\n"}`, "ID: sha256:abc", ""},
		{"tagged", `{"stream":"Loaded image: hf/box:1\n"}` + "\n" + `{"stream":"Loaded image: hf/box:2\n"}`, "hf/box:1", ""},
		{"progress first", `{"status":"Loading layer","progressDetail":{"current":1,"total":2}}{"stream":"Loaded image ID: sha256:d\n"}`, "ID: sha256:d", ""},
		{"engine error", `{"errorDetail":{"message":"unexpected EOF"},"error":"unexpected EOF"}`, "", "unexpected EOF"},
		{"plain error", `{"error":"bad tar"}`, "", "bad tar"},
		{"nothing loaded", `{"stream":"hello\n"}`, "", "the engine loaded no image"},
		{"garbage", `not json`, "", "read engine answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseLoadStream(strings.NewReader(tc.stream))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestBuildSpecPrivileged(t *testing.T) {
	spec, err := buildSpec(template("p", types.Resources{}, nil), TemplateConfig{Image: ImageRef{Tag: "x"}, Privileged: true}, nil,
		specInput{Labels: testLabels, Network: "hf"})
	require.NoError(t, err)
	assert.True(t, spec.HostConfig.Privileged)
}

func TestImageRefString(t *testing.T) {
	assert.Equal(t, "hf/box:1", ImageRef{Tag: "hf/box:1"}.String())
	assert.Equal(t, "https://files.lab/box.tar", ImageRef{URL: "https://files.lab/box.tar"}.String())
	assert.Equal(t, "https://me:xxxxx@files.lab/box.tar", ImageRef{URL: "https://me:secret@files.lab/box.tar"}.String(),
		"a password in the URL never reaches labels or machine information")
}
