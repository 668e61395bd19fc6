//go:build !linux

package native

import (
	"context"
	"errors"
	"syscall"

	"github.com/hf-fleet/hf/lib/types"
)

// On systems other than Linux, Prepare refuses with ErrUnsupportedOS, so none
// of these is reached; they exist so the package builds everywhere (macOS
// support would replace them with dscl/hdiutil-based versions).

var errNotLinux = errors.New("the native driver runs on linux only")

// procSpec is how to start an entry process.
type procSpec struct {
	Shell, Script string
	Env           []string
	Dir           string
	Log           string
	Cred          *syscall.Credential
	Cgroup        string
	CgroupV1      []string
	NoNewPrivs    bool
}

func startProcess(procSpec, string) (int, uint64, error) { return 0, 0, errNotLinux }

func reapChild(int) (bool, *int, string) { return true, nil, errNotLinux.Error() }

func signalProc(int, syscall.Signal) error { return errNotLinux }

func probeCgroups(string) cgroupSetup { return cgroupSetup{Reason: errNotLinux.Error()} }

func limitUserProcesses(int64) (int64, error) { return 0, errNotLinux }

func createCgroup(cgroupSetup, string, types.Resources, int64) ([]string, error) {
	return nil, errNotLinux
}

func cgroupProcs(string) []int { return nil }

func cgroupCPUUsec([]string) (uint64, bool) { return 0, false }
func cgroupOOMKills([]string) uint64        { return 0 }

func killCgroup(string) bool { return false }

func removeCgroup(context.Context, string) error { return nil }

func unmountUnder(string) error { return nil }

func (d *Driver) createUser(context.Context, Config, string, string) (passwdEntry, error) {
	return passwdEntry{}, errNotLinux
}

func (d *Driver) deleteUser(context.Context, Config, string, bool) error { return errNotLinux }

func (d *Driver) sweepUID(int) error { return errNotLinux }
