package types

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A machine's status shows its resource's information and addresses: after
// Derive it holds them once, and keeps apart what differs.
func TestMachineDeriveSharesResourceFacts(t *testing.T) {
	m := &Machine{Status: MachineStatus{Phase: MachineRunning,
		Resource:           &Resource{ID: "r1", Info: map[string]string{"host": "n1"}, Endpoints: []Endpoint{{Protocol: "ssh", Address: "a:22"}}},
		MachineInformation: map[string]string{"host": "n1"}, Addresses: []Endpoint{{Protocol: "ssh", Address: "a:22"}}}}
	m.Derive()
	assert.Equal(t, reflect.ValueOf(m.Status.Resource.Info).UnsafePointer(), reflect.ValueOf(m.Status.MachineInformation).UnsafePointer())
	assert.Same(t, &m.Status.Resource.Endpoints[0], &m.Status.Addresses[0])

	m.Status.MachineInformation = map[string]string{"host": "n2"}
	m.Status.Addresses = []Endpoint{{Protocol: "ssh", Address: "b:22"}}
	m.Derive()
	assert.Equal(t, "n2", m.Status.MachineInformation["host"])
	assert.Equal(t, "n1", m.Status.Resource.Info["host"])
	assert.Equal(t, "b:22", m.Status.Addresses[0].Address)
	assert.Equal(t, "a:22", m.Status.Resource.Endpoints[0].Address)
}
