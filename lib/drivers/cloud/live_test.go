package cloud

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/drivertest"
	"github.com/hf-fleet/hf/lib/types"
)

// TestLive runs the conformance suite against a real cloud account, with
// the SDK's own credential chain. It runs only when asked for and never in
// CI (it costs money and needs credentials):
//
//	HF_AWS_LIVE=1 HF_AWS_LIVE_CONFIG='{"region":"eu-central-1","quota":{"vcpus":4}}' \
//	HF_AWS_LIVE_TEMPLATE='{"ami":"ami-...","instance_type":"t3.micro"}' \
//	go test -run TestLive/aws -timeout 30m ./lib/drivers/cloud/
//
//	HF_GCE_LIVE=1 HF_GCE_LIVE_CONFIG='{"project":"p","zone":"europe-west1-b","quota":{"vcpus":4}}' \
//	HF_GCE_LIVE_TEMPLATE='{"image_family":"debian-12","image_project":"debian-cloud","machine_type":"e2-micro"}' \
//	go test -run TestLive/gce -timeout 30m ./lib/drivers/cloud/
func TestLive(t *testing.T) {
	for _, c := range []struct{ kind, env string }{{TypeAWS, "HF_AWS"}, {TypeGCE, "HF_GCE"}} {
		t.Run(c.kind, func(t *testing.T) {
			if os.Getenv(c.env+"_LIVE") != "1" || os.Getenv("CI") != "" {
				t.Skipf("live %s account test: set %s_LIVE=1, %s_LIVE_CONFIG and %s_LIVE_TEMPLATE (never in CI)", c.kind, c.env, c.env, c.env)
			}
			cfg, entry := os.Getenv(c.env+"_LIVE_CONFIG"), os.Getenv(c.env+"_LIVE_TEMPLATE")
			require.NotEmpty(t, cfg, c.env+"_LIVE_CONFIG")
			require.NotEmpty(t, entry, c.env+"_LIVE_TEMPLATE")
			tmpl := types.MachineTemplate{
				TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate},
				Metadata: types.ObjectMeta{Name: "hf-live"},
				Spec: types.MachineTemplateSpec{
					Resources:             types.Resources{CPU: 2, RAMGB: 1, DiskGB: 10},
					ProviderConfiguration: map[string]json.RawMessage{c.kind: json.RawMessage(entry)},
				},
			}
			drivertest.Conformance(t, drivertest.Harness{
				New: func(t *testing.T, dataDir string) drivers.Driver {
					env := drivers.Env{Instance: c.kind, NodeName: "hf-live-test", DataDir: dataDir, Log: testLog(t)}
					d := NewAWS(env)
					if c.kind == TypeGCE {
						d = NewGCE(env)
					}
					require.NoError(t, d.Prepare(t.Context(), []byte(cfg)))
					return d
				},
				Template:    tmpl,
				Concurrency: 2,
				Timeout:     10 * time.Minute,
			})
		})
	}
}
