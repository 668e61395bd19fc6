package cloud

import (
	"regexp"
	"strings"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// AWSTemplate is a template's providerConfiguration entry for the aws driver
// (under the instance name or "aws"). Keys it leaves out come from the
// driver's defaults.
type AWSTemplate struct {
	// AMI is the image id ("ami-0abc..."); or give AMIFilter.
	AMI string `json:"ami"`
	// AMIFilter picks the newest image whose name matches (wildcards * and
	// ?) among the owners' images.
	AMIFilter *AMIFilter `json:"ami_filter"`
	// InstanceType is the EC2 instance type ("t3.small").
	InstanceType string `json:"instance_type"`
	// SubnetID places the instance; or SubnetTags picks the subnet with
	// these tags; neither: the default VPC's default subnet.
	SubnetID   string            `json:"subnet_id"`
	SubnetTags map[string]string `json:"subnet_tags"`
	// SecurityGroupIDs are attached to the instance.
	SecurityGroupIDs []string `json:"security_group_ids"`
	// KeyName is an existing key pair for ssh; optional.
	KeyName string `json:"key_name"`
	// GenerateKeyPair makes an ed25519 key pair for each machine, named
	// and tagged like its instance, and deletes it with the instance. The
	// private key is in the machine's information (ssh_private_key), which
	// only those who may read the machine see; hf never logs it. Not with
	// key_name (the driver's default key_name is then not used).
	GenerateKeyPair bool `json:"generate_key_pair"`
	// Tags are added to the instance and its volume (hf's own tags win).
	Tags map[string]string `json:"tags"`
	// StartupScript is run once by cloud-init at first boot, after the
	// claim's metadata is written to /etc/hf/metadata.json and .env.
	StartupScript string `json:"startup_script"`
	// Ports maps connect protocols to ports (default ssh 22, http 80, https
	// 443, rdp 3389, vnc 5900).
	Ports map[string]int `json:"ports"`
}

// AMIFilter selects an image by name.
type AMIFilter struct {
	Name   string   `json:"name"`
	Owners []string `json:"owners"`
}

// GCETemplate is a template's providerConfiguration entry for the gce driver
// (under the instance name or "gce").
type GCETemplate struct {
	// Image is an image by name or URL; or give ImageFamily.
	Image string `json:"image"`
	// ImageFamily is the family whose newest image is used.
	ImageFamily string `json:"image_family"`
	// ImageProject holds the image or family; default: the driver's project.
	ImageProject string `json:"image_project"`
	// MachineType is the machine type ("e2-small").
	MachineType string `json:"machine_type"`
	// Network and Subnetwork place the instance; default: the "default" network.
	Network    string `json:"network"`
	Subnetwork string `json:"subnetwork"`
	// ExternalIP gives the instance a public address.
	ExternalIP bool `json:"external_ip"`
	// Labels are added to the instance (hf's own labels win).
	Labels map[string]string `json:"labels"`
	// StartupScript is the instance's startup-script metadata.
	StartupScript string `json:"startup_script"`
	// Ports maps connect protocols to ports, as for aws.
	Ports map[string]int `json:"ports"`
}

var (
	amiID        = regexp.MustCompile(`^ami-[0-9a-f]{8,17}$`)
	awsName      = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)
	resourceID   = regexp.MustCompile(`^(subnet|sg)-[0-9a-f]{8,17}$`)
	gceName      = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
	gceLabelKey  = regexp.MustCompile(`^[a-z][-_a-z0-9]{0,62}$`)
	gceLabelVal  = regexp.MustCompile(`^[-_a-z0-9]{0,63}$`)
	gceImageLink = regexp.MustCompile(`^(https://[^ ]+/)?projects/[^/ ]+/global/images/[^/ ]+$`)
)

// parseAWSTemplate decodes an entry strictly, fills the defaults and checks it.
func parseAWSTemplate(raw []byte, def AWSDefaults) (AWSTemplate, error) {
	var tc AWSTemplate
	if err := drivers.DecodeConfig(raw, &tc); err != nil {
		return AWSTemplate{}, err
	}
	if tc.InstanceType == "" {
		tc.InstanceType = def.InstanceType
	}
	if tc.SubnetID == "" && len(tc.SubnetTags) == 0 {
		tc.SubnetID, tc.SubnetTags = def.SubnetID, def.SubnetTags
	}
	if len(tc.SecurityGroupIDs) == 0 {
		tc.SecurityGroupIDs = def.SecurityGroupIDs
	}
	if tc.KeyName == "" && !tc.GenerateKeyPair {
		tc.KeyName = def.KeyName
	}
	return tc, tc.validate()
}

func (tc AWSTemplate) validate() error {
	switch {
	case tc.AMI == "" && tc.AMIFilter == nil:
		return types.Invalid("ami", "give an ami id or an ami_filter")
	case tc.AMI != "" && tc.AMIFilter != nil:
		return types.Invalid("ami", "give an ami id or an ami_filter, not both")
	case tc.AMI != "" && !amiID.MatchString(tc.AMI):
		return types.Invalid("ami", "%q is not an image id (ami-...)", tc.AMI)
	case tc.AMIFilter != nil && tc.AMIFilter.Name == "":
		return types.Invalid("ami_filter.name", "is required")
	case tc.InstanceType == "":
		return types.Invalid("instance_type", "is required (here or in the driver's defaults)")
	}
	shared := AWSDefaults{InstanceType: tc.InstanceType, SubnetID: tc.SubnetID, SubnetTags: tc.SubnetTags, SecurityGroupIDs: tc.SecurityGroupIDs}
	if err := shared.validate(); err != nil {
		return err
	}
	if tc.KeyName != "" && tc.GenerateKeyPair {
		return types.Invalid("generate_key_pair", "give a key_name or generate_key_pair, not both")
	}
	for k := range tc.Tags {
		if k == "" || strings.HasPrefix(k, "aws:") || strings.HasPrefix(k, awsTagPrefix) || k == "Name" {
			return types.Invalid("tags."+k, "is reserved (empty, aws:*, %s*, Name)", awsTagPrefix)
		}
	}
	if err := checkScript(tc.StartupScript); err != nil {
		return err
	}
	return checkPorts(tc.Ports)
}

// parseGCETemplate decodes an entry strictly, fills the defaults and checks it.
func parseGCETemplate(raw []byte, def GCEDefaults) (GCETemplate, error) {
	var tc GCETemplate
	if err := drivers.DecodeConfig(raw, &tc); err != nil {
		return GCETemplate{}, err
	}
	if tc.MachineType == "" {
		tc.MachineType = def.MachineType
	}
	if tc.Network == "" && tc.Subnetwork == "" {
		tc.Network, tc.Subnetwork = def.Network, def.Subnetwork
	}
	return tc, tc.validate()
}

func (tc GCETemplate) validate() error {
	switch {
	case tc.Image == "" && tc.ImageFamily == "":
		return types.Invalid("image", "give an image or an image_family")
	case tc.Image != "" && tc.ImageFamily != "":
		return types.Invalid("image", "give an image or an image_family, not both")
	case tc.Image != "" && !gceName.MatchString(tc.Image) && !gceImageLink.MatchString(tc.Image):
		return types.Invalid("image", "%q is not an image name or projects/<p>/global/images/<name>", tc.Image)
	case tc.ImageFamily != "" && !gceName.MatchString(tc.ImageFamily):
		return types.Invalid("image_family", "%q is not a family name", tc.ImageFamily)
	case tc.ImageProject != "" && !gceProject.MatchString(tc.ImageProject):
		return types.Invalid("image_project", "%q is not a project id", tc.ImageProject)
	case tc.MachineType == "":
		return types.Invalid("machine_type", "is required (here or in the driver's defaults)")
	}
	if err := (GCEDefaults{MachineType: tc.MachineType}).validate(); err != nil {
		return err
	}
	for k, v := range tc.Labels {
		switch {
		case !gceLabelKey.MatchString(k):
			return types.Invalid("labels."+k, "want a lower-case letter, then lower-case letters, digits, '-' or '_'")
		case strings.HasPrefix(k, gceLabelPrefix):
			return types.Invalid("labels."+k, "%s* labels are hf's own", gceLabelPrefix)
		case !gceLabelVal.MatchString(v):
			return types.Invalid("labels."+k, "value %q: want lower-case letters, digits, '-' or '_'", v)
		}
	}
	if err := checkScript(tc.StartupScript); err != nil {
		return err
	}
	return checkPorts(tc.Ports)
}

// maxScript is the largest startup script; EC2's user data and GCE's
// metadata both stop at about 16 KiB (before base64).
const maxScript = 12 << 10

func checkScript(s string) error {
	switch {
	case len(s) > maxScript:
		return types.Invalid("startup_script", "at most %d bytes", maxScript)
	case strings.ContainsRune(s, 0):
		return types.Invalid("startup_script", "must not contain NUL")
	}
	return nil
}

// defaultPorts are the ports of the connect protocols a VM usually serves.
var defaultPorts = map[string]int{"ssh": 22, "http": 80, "https": 443, "rdp": 3389, "vnc": 5900}

func checkPorts(ports map[string]int) error {
	for p, n := range ports {
		if n < 1 || n > 65535 {
			return types.Invalid("ports."+p, "want a port number 1-65535")
		}
	}
	return nil
}

// port is the port of a connect protocol: the template's, else the default.
func port(ports map[string]int, protocol string) (int, bool) {
	if n, ok := ports[protocol]; ok {
		return n, true
	}
	n, ok := defaultPorts[protocol]
	return n, ok
}
