package native

import (
	"bytes"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/fetch"
	"github.com/hf-fleet/hf/lib/types"
)

// TemplateConfig is a template's providerConfiguration entry for the native
// driver (key "native" or the instance name).
type TemplateConfig struct {
	// Images are unpacked into the machine's workspace, one directory per tag.
	Images []Image `json:"images"`
	// Entry is what runs as the machine's user (`shell -c entry`) in its home.
	// It is a text/template: {{.Disks.<tag>}} is the directory an image was
	// unpacked into, and {{.User}}, {{.Home}}, {{.Workspace}} what their names
	// say. Claim metadata is never rendered into it (that would put a user's
	// text in a shell string): it reaches the entry as environment variables,
	// under the keys the template declares ("$name"). Required.
	Entry string `json:"entry"`
	// Groups are existing host groups the machine's processes (entry and
	// shell) run in besides the user's own; each must be in the node's
	// allowed_groups.
	Groups []string `json:"groups"`
	// Env is added to the entry's environment; the driver's own variables
	// (HOME, USER, LOGNAME, SHELL, HF_NATIVE_ID) cannot be set here.
	Env map[string]string `json:"env"`
}

// Image is one archive (tar, tar.gz, tar.bz2, tar.xz or tar.zst) to unpack.
type Image struct {
	// URL is where to download it (http or https).
	URL string `json:"url"`
	// Sum is its checksum, "sha256:<64 hex digits>".
	Sum string `json:"sum"`
	// Tag names its directory in the workspace and its key in .Disks.
	Tag string `json:"tag"`
}

// EntryData is what the entry template is rendered with: paths and names the
// driver made, never a claim's text.
type EntryData struct {
	// Disks maps each image tag to the directory it was unpacked into.
	Disks map[string]string
	// User is the machine's user name (the daemon's user when unprivileged).
	User string
	// Home is the entry's home and working directory.
	Home string
	// Workspace is the machine's workspace directory.
	Workspace string
}

var (
	tagRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
	envRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

const maxTag = 64

// reservedEnv are variables the driver sets; neither templates nor claims may.
var reservedEnv = map[string]bool{"HOME": true, "USER": true, "LOGNAME": true, "SHELL": true, envMachineID: true}

// parseTemplateConfig decodes a template entry strictly and validates it.
func parseTemplateConfig(raw []byte) (TemplateConfig, error) {
	var tc TemplateConfig
	if err := drivers.DecodeConfig(raw, &tc); err != nil {
		return TemplateConfig{}, err
	}
	return tc, tc.Validate()
}

// Validate checks the options; the error names the key ("images[0].sum").
func (tc TemplateConfig) Validate() error {
	tags := map[string]bool{}
	for i, img := range tc.Images {
		key := fmt.Sprintf("images[%d]", i)
		if img.URL == "" {
			return types.Invalid(key+".url", "required")
		}
		u, err := url.Parse(img.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return types.Invalid(key+".url", "want an absolute http or https URL, got %q", img.URL)
		}
		if img.Sum == "" {
			return types.Invalid(key+".sum", `required ("sha256:<64 hex digits>")`)
		}
		if _, err := fetch.ParseSum(img.Sum); err != nil {
			return drivers.PrefixField(key+".sum", err)
		}
		if img.Tag == "" {
			return types.Invalid(key+".tag", "required (it names the image's directory in the workspace)")
		}
		if !tagRE.MatchString(img.Tag) || len(img.Tag) > maxTag {
			return types.Invalid(key+".tag", "must start with a letter or digit and hold only letters, digits, '_' and '-' (at most %d), got %q", maxTag, img.Tag)
		}
		if tags[img.Tag] {
			return types.Invalid(key+".tag", "%q is used by an earlier image", img.Tag)
		}
		tags[img.Tag] = true
	}
	if strings.TrimSpace(tc.Entry) == "" {
		return types.Invalid("entry", "required: the program the machine runs")
	}
	if _, err := tc.entryTemplate(); err != nil {
		return err
	}
	for i, g := range tc.Groups {
		if !validGroupName(g) {
			return types.Invalid(fmt.Sprintf("groups[%d]", i), "not a valid group name: %q", g)
		}
	}
	for k := range tc.Env {
		if !envRE.MatchString(k) {
			return types.Invalid("env."+k, "not a valid variable name")
		}
		if reservedEnv[k] {
			return types.Invalid("env."+k, "is set by the driver")
		}
	}
	return nil
}

// entryFields are the fields of EntryData an entry may refer to.
var entryFields = map[string]bool{"Disks": true, "User": true, "Home": true, "Workspace": true}

// entryTemplate parses Entry and checks that it refers only to EntryData's
// fields and that every {{.Disks.x}} names a tag.
func (tc TemplateConfig) entryTemplate() (*template.Template, error) {
	tmpl, err := template.New("entry").Option("missingkey=error").Parse(tc.Entry)
	if err != nil {
		return nil, types.Invalid("entry", "%s", strings.TrimPrefix(err.Error(), "template: "))
	}
	tags := map[string]bool{}
	for _, img := range tc.Images {
		tags[img.Tag] = true
	}
	var refs [][]string
	for _, t := range tmpl.Templates() { // {{define}}d ones too
		refs = append(refs, fieldRefs(t.Tree.Root)...)
	}
	for _, ref := range refs {
		switch {
		case ref[0] == "Meta":
			return nil, types.Invalid("entry", "claim metadata is not rendered into the entry (it would reach the shell as code); "+
				"declare the key in the template's spec.claimMetadata and read it as an environment variable, e.g. \"$%s\"", strings.Join(ref[1:], "."))
		case !entryFields[ref[0]]:
			return nil, types.Invalid("entry", "refers to .%s; an entry may use .Disks.<tag>, .User, .Home and .Workspace", ref[0])
		case ref[0] == "Disks" && len(ref) >= 2 && !tags[ref[1]]:
			known := make([]string, 0, len(tags))
			for t := range tags {
				known = append(known, t)
			}
			sort.Strings(known)
			return nil, types.Invalid("entry", "refers to disk %q but no image has that tag (tags: %s)", ref[1], strings.Join(known, ", "))
		}
	}
	return tmpl, nil
}

// fieldRefs returns the path of every field reference in the template tree:
// [Disks x] for .Disks.x and $.Disks.x, [User] for .User. A reference through
// a variable other than $ (a range's element) has no path from the root and is
// not returned; entries have nothing to range over but Disks.
func fieldRefs(n parse.Node) [][]string {
	var out [][]string
	var walk func(parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n == nil {
				return
			}
			for _, c := range n.Nodes {
				walk(c)
			}
		case *parse.ActionNode:
			walk(n.Pipe)
		case *parse.PipeNode:
			if n == nil {
				return
			}
			for _, c := range n.Cmds {
				walk(c)
			}
		case *parse.CommandNode:
			for _, a := range n.Args {
				walk(a)
			}
		case *parse.FieldNode:
			out = append(out, n.Ident)
		case *parse.ChainNode:
			walk(n.Node)
		case *parse.VariableNode:
			if len(n.Ident) >= 2 && n.Ident[0] == "$" {
				out = append(out, n.Ident[1:])
			}
		case *parse.IfNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			walk(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.TemplateNode:
			walk(n.Pipe)
		}
	}
	walk(n)
	return out
}

// renderEntry renders the entry with data; a missing key fails.
func (tc TemplateConfig) renderEntry(data EntryData) (string, error) {
	tmpl, err := tc.entryTemplate()
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, data); err != nil {
		return "", fmt.Errorf("render entry: %w", err)
	}
	return b.String(), nil
}

// entryEnv builds the entry's environment, lowest precedence first: a default
// PATH, what drivers.MachineEnv passes of the claim and the template, then the
// driver's own variables.
func entryEnv(t types.MachineTemplate, tmplEnv, meta map[string]string, id, user, home, shell string) []string {
	env := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"}
	for k, v := range drivers.MachineEnv(t, tmplEnv, meta) {
		env[k] = v
	}
	env["HOME"], env["USER"], env["LOGNAME"], env["SHELL"] = home, user, user, shell
	env[envMachineID] = id
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
