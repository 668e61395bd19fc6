package types

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// A machine's owner facet stores what the status shows of its resource once:
// its information and addresses, when they are the resource's, are left out
// and shown again when read; those that differ are kept.
func TestMachineOwnerStoresResourceFactsOnce(t *testing.T) {
	res := &Resource{ID: "r1", Driver: "d", Info: map[string]string{"host": "n1"}, Endpoints: []Endpoint{{Protocol: "ssh", Address: "a:22"}}}
	m := &Machine{Status: MachineStatus{Phase: MachineRunning, Resource: res,
		MachineInformation: map[string]string{"host": "n1"}, Addresses: []Endpoint{{Protocol: "ssh", Address: "a:22"}}}}
	owner := func(m *Machine) Facet { return m.Facets()[0] }
	b, err := json.Marshal(owner(m).Value)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "machineInformation")
	assert.NotContains(t, string(b), "addresses")
	assert.Equal(t, 2, strings.Count(string(b), "a:22")+strings.Count(string(b), `"n1"`), "the resource's, once each: %s", b)
	var back Machine
	require.NoError(t, json.Unmarshal(b, owner(&back).Value))
	assert.Equal(t, map[string]string{"host": "n1"}, back.Status.MachineInformation)
	assert.Equal(t, []Endpoint{{Protocol: "ssh", Address: "a:22"}}, back.Status.Addresses)

	m.Status.MachineInformation = map[string]string{"host": "shown"}
	m.Status.Addresses = []Endpoint{{Protocol: "ssh", Address: "b:22"}}
	b, err = json.Marshal(owner(m).Value)
	require.NoError(t, err)
	back = Machine{}
	require.NoError(t, json.Unmarshal(b, owner(&back).Value))
	assert.Equal(t, map[string]string{"host": "shown"}, back.Status.MachineInformation, "kept where it differs")
	assert.Equal(t, "b:22", back.Status.Addresses[0].Address)
	assert.Equal(t, "a:22", back.Status.Resource.Endpoints[0].Address)

	// A record of an earlier release, with both written out, reads the same.
	old := `{"status":{"phase":"Running","resource":{"id":"r1","driver":"d","info":{"host":"n1"},"endpoints":[{"protocol":"ssh","address":"a:22"}]},"machineInformation":{"host":"n1"},"addresses":[{"protocol":"ssh","address":"a:22"}]}}`
	back = Machine{}
	require.NoError(t, json.Unmarshal([]byte(old), owner(&back).Value))
	assert.Equal(t, map[string]string{"host": "n1"}, back.Status.MachineInformation)
	assert.Equal(t, "a:22", back.Status.Addresses[0].Address)
}
