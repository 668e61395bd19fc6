package fault

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// Build builds hf-node into dir and returns the binary's path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "hf-node")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/hf-fleet/hf/cmd/hf-node").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build hf-node: %w\n%s", err, out)
	}
	return bin, nil
}
