package docker

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/distribution/reference"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// TemplateConfig is a template's providerConfiguration entry for the docker
// driver (under the instance name or "docker").
type TemplateConfig struct {
	// Image is what the container runs. Required.
	Image ImageRef `json:"image"`
	// Command replaces the image's command (CMD).
	Command []string `json:"command"`
	// Entrypoint replaces the image's entrypoint.
	Entrypoint []string `json:"entrypoint"`
	// Env is added to the container's environment; the claim's metadata is
	// added after it and wins.
	Env map[string]string `json:"env"`
	// Ports are published to random ports on 127.0.0.1 ("8080/tcp", "53/udp";
	// a bare number is tcp). Each becomes a connect endpoint.
	Ports []string `json:"ports"`
	// Volumes are paths in the container backed by anonymous volumes, which
	// are removed with the container. Each is the container user's (its top
	// directory, mode 0755), so a machine that runs as nobody can write to
	// it.
	Volumes []string `json:"volumes"`
	// Privileged runs the container privileged; the node must allow it
	// (allow_privileged).
	Privileged bool `json:"privileged"`
	// User is who the container runs as, "uid" or "uid:gid" (numeric); the
	// node's user when empty. Root (uid 0) only where allow_root is set.
	User string `json:"user"`
}

// ImageRef names an image: a tag already on the engine (never pulled), or a
// `docker save` tarball downloaded from URL, checked against Sum and loaded
// once.
type ImageRef struct {
	// Tag is a local image ("hf/ubuntu:24.04", or an image id).
	Tag string `json:"tag"`
	// URL is where the tarball is (http or https).
	URL string `json:"url"`
	// Sum is the tarball's "sha256:<64 hex digits>"; required with URL.
	Sum string `json:"sum"`
}

// String is the reference as the template gives it: the tag, or the URL
// with any password hidden (it ends up in labels and machine information).
func (r ImageRef) String() string {
	if r.Tag != "" {
		return r.Tag
	}
	if u, err := url.Parse(r.URL); err == nil {
		return u.Redacted()
	}
	return r.URL
}

// port is one published port: number and transport ("tcp", "udp", "sctp").
type port struct {
	Number int
	Proto  string
}

// String is the engine's form, "8080/tcp".
func (p port) String() string { return strconv.Itoa(p.Number) + "/" + p.Proto }

// ParseTemplateConfig decodes a template entry strictly and validates it.
func ParseTemplateConfig(raw []byte) (TemplateConfig, error) {
	var tc TemplateConfig
	if err := drivers.DecodeConfig(raw, &tc); err != nil {
		return TemplateConfig{}, err
	}
	return tc, tc.Validate()
}

var sha256Sum = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Validate checks the entry; the error names the key.
func (tc TemplateConfig) Validate() error {
	if err := tc.Image.validate(); err != nil {
		return err
	}
	for i, a := range tc.Command {
		if strings.ContainsRune(a, 0) {
			return types.Invalid(fmt.Sprintf("command[%d]", i), "must not contain NUL")
		}
	}
	for i, a := range tc.Entrypoint {
		if strings.ContainsRune(a, 0) {
			return types.Invalid(fmt.Sprintf("entrypoint[%d]", i), "must not contain NUL")
		}
	}
	for k, v := range tc.Env {
		if err := checkEnv(k, v); err != nil {
			return types.Invalid("env."+k, "%s", err.Error())
		}
	}
	if _, err := parsePorts(tc.Ports); err != nil {
		return err
	}
	if tc.User != "" {
		// Root is the node's to allow (templateConfig); the form is checked here.
		if err := checkUser(tc.User, true); err != nil {
			return types.Invalid("user", "%s", err.Error())
		}
	}
	seen := map[string]bool{}
	for i, v := range tc.Volumes {
		key := fmt.Sprintf("volumes[%d]", i)
		switch {
		case !path.IsAbs(v):
			return types.Invalid(key, "%q: want an absolute path in the container", v)
		case path.Clean(v) == "/":
			return types.Invalid(key, "cannot be the root directory")
		case strings.ContainsAny(v, ":,\x00"):
			return types.Invalid(key, "%q: must not contain ':' or ','", v)
		case seen[path.Clean(v)]:
			return types.Invalid(key, "%q is listed twice", v)
		}
		seen[path.Clean(v)] = true
	}
	return nil
}

func (r ImageRef) validate() error {
	switch {
	case r.Tag == "" && r.URL == "":
		return types.Invalid("image", "needs a tag or a url")
	case r.Tag != "" && r.URL != "":
		return types.Invalid("image", "give a tag or a url, not both")
	case r.Tag != "":
		if r.Sum != "" {
			return types.Invalid("image.sum", "is only for a url")
		}
		if _, err := reference.ParseAnyReference(r.Tag); err != nil {
			return types.Invalid("image.tag", "%q: %s", r.Tag, err.Error())
		}
		return nil
	}
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return types.Invalid("image.url", "%q: want an http or https URL", r.URL)
	}
	if r.Sum == "" {
		return types.Invalid("image.sum", "is required with a url (sha256:<64 hex digits>)")
	}
	if !sha256Sum.MatchString(r.Sum) {
		return types.Invalid("image.sum", "%q: want sha256:<64 lower-case hex digits>", r.Sum)
	}
	return nil
}

// checkEnv rejects what cannot be one KEY=value entry.
func checkEnv(k, v string) error {
	switch {
	case k == "":
		return fmt.Errorf("empty variable name")
	case strings.ContainsAny(k, "=\x00"):
		return fmt.Errorf("variable name %q must not contain '=' or NUL", k)
	case strings.ContainsRune(v, 0):
		return fmt.Errorf("value must not contain NUL")
	}
	return nil
}

// parsePorts parses the ports list ("8080/tcp", "53/udp", "22").
func parsePorts(list []string) ([]port, error) {
	out := make([]port, 0, len(list))
	seen := map[port]bool{}
	for i, s := range list {
		key := fmt.Sprintf("ports[%d]", i)
		num, proto, found := strings.Cut(s, "/")
		if !found {
			proto = "tcp"
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 1 || n > 65535 {
			return nil, types.Invalid(key, "%q: want a port number 1-65535, optionally /tcp, /udp or /sctp", s)
		}
		if proto != "tcp" && proto != "udp" && proto != "sctp" {
			return nil, types.Invalid(key, "%q: protocol must be tcp, udp or sctp", s)
		}
		p := port{Number: n, Proto: proto}
		if seen[p] {
			return nil, types.Invalid(key, "%q is listed twice", s)
		}
		seen[p] = true
		out = append(out, p)
	}
	return out, nil
}
