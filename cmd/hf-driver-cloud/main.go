// Command hf-driver-cloud runs hf's cloud drivers, aws (EC2) and gce
// (Compute Engine), in a process of their own. hf-node starts it when its
// configuration has a driver of these types, finding it next to its own
// executable or on PATH, and stops it when it stops: the SDKs these drivers
// need are two thirds of a binary that holds them, and a node that runs no
// cloud driver neither loads nor keeps them. It is not run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/cloud"
	"github.com/hf-fleet/hf/lib/drivers/plugin"
)

// Name is this plugin's executable, as hf-node looks for it.
const Name = "hf-driver-cloud"

func main() {
	if err := plugin.Serve(Name, factories()); err != nil {
		fmt.Fprintln(os.Stderr, Name+":", err)
		os.Exit(2)
	}
}

// factories are the driver types this plugin runs.
func factories() map[string]drivers.Factory {
	return map[string]drivers.Factory{cloud.TypeAWS: cloud.NewAWS, cloud.TypeGCE: cloud.NewGCE}
}
