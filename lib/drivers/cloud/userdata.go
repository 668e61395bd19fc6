package cloud

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// Claim metadata reaches a VM only as data: files written by cloud-init (aws)
// or metadata items (gce), never inside a script. The startup script reads
// them.
const (
	metadataJSONPath = "/etc/hf/metadata.json"
	metadataEnvPath  = "/etc/hf/metadata.env"
	startupPath      = "/var/lib/hf/startup.sh"
)

// metadataJSON is meta as a JSON object with sorted keys.
func metadataJSON(meta map[string]string) []byte {
	b, _ := json.Marshal(meta) // a map of strings always marshals
	return b
}

// metadataEnv is meta as a file a POSIX shell can source: KEY='value' lines,
// each value single-quoted (a quote inside is closed, escaped and reopened), so a value is
// never run. Keys are variable names (the metadata rules check them).
func metadataEnv(meta map[string]string) []byte {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		b.WriteString(k)
		b.WriteString("='")
		b.WriteString(strings.ReplaceAll(meta[k], "'", `'\''`))
		b.WriteString("'\n")
	}
	return []byte(b.String())
}

// cloudConfig is the user data of an EC2 instance: a #cloud-config document
// that writes the metadata files and the startup script and runs the script
// once. Every file's content is base64 in the YAML, so no value can change
// the document's structure.
func cloudConfig(meta map[string]string, script string) string {
	var b strings.Builder
	b.WriteString("#cloud-config\nwrite_files:\n")
	file := func(path, perm string, content []byte) {
		b.WriteString("  - path: " + path + "\n")
		b.WriteString("    permissions: '" + perm + "'\n")
		b.WriteString("    encoding: b64\n")
		b.WriteString("    content: " + base64.StdEncoding.EncodeToString(content) + "\n")
	}
	file(metadataJSONPath, "0644", metadataJSON(meta))
	file(metadataEnvPath, "0644", metadataEnv(meta))
	if script != "" {
		file(startupPath, "0755", []byte(script))
		b.WriteString("runcmd:\n  - [" + startupPath + "]\n")
	}
	return b.String()
}
