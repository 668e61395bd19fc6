package drivers

import (
	"maps"
	"strings"

	"github.com/hf-fleet/hf/lib/types"
)

// MachineEnv is the environment a machine of template t gets from its claim,
// lowest precedence first: the claim metadata the template declares (see
// types.MachineTemplate.MachineMetadata; nothing else of meta survives), the
// template's own env (the operator's word wins over a claim's), then the
// node's HF_* keys. Drivers add their own variables on top.
func MachineEnv(t types.MachineTemplate, tmplEnv, meta map[string]string) map[string]string {
	meta = t.MachineMetadata(meta)
	env := make(map[string]string, len(meta)+len(tmplEnv))
	for k, v := range meta {
		if !strings.HasPrefix(k, types.SystemMetadataPrefix) {
			env[k] = v
		}
	}
	maps.Copy(env, tmplEnv)
	for k, v := range meta {
		if strings.HasPrefix(k, types.SystemMetadataPrefix) {
			env[k] = v
		}
	}
	return env
}
