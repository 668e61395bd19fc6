package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hf-fleet/hf/lib/config"
)

// FuzzLoad feeds arbitrary bytes through Load as a config file. Load must never
// panic, and whatever it accepts must validate and hand every driver valid JSON.
func FuzzLoad(f *testing.F) {
	example, err := os.ReadFile(examplePath)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(example),
		"",
		"~",
		"name: a\n",
		"cluster: {join: [a, 'b:1'], profile: wan, probe_timeout: 1s}\n",
		"labels: {a.b/C: d, x: 1}\ndrivers: [{name: test, config: {a: [1, {b: .nan}]}}]\n",
		"a: &a [x, *a]\n",
		"d: &d {x: 1}\ndrivers: [{name: t, config: {<<: *d}}]\n",
		"scheduler: {bind_timeout: 300}\n",
		"api: {tokens: [{name: ci, token: 0123456789abcdef, role: user}]}\n",
		"cluster: 5\n",
		"- a\n",
		"name: a\n---\nname: b\n",
		"? [a]\n: b\n",
		"log: {level: !!binary aGk=}\n",
		"store: {gc_interval: 1e400}\n",
		"labels: {'x]': a, 'y[': b}\n",
		"drivers:\n- name: test\n- name: test\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "hf.yml")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := config.Load(config.LoadOptions{File: p, Env: []string{"HOME=/home/fuzz"}})
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Load accepted a config that Validate rejects: %v", err)
		}
		for _, d := range c.Drivers {
			if _, err := d.ConfigJSON(); err != nil {
				t.Fatalf("Load accepted a driver config that is not JSON: %v", err)
			}
		}
	})
}
