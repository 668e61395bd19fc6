package drivers

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// fakeDriver records the Env it was built with.
type fakeDriver struct {
	name string
	env  Env
}

func (f *fakeDriver) Name() string                                      { return f.name }
func (f *fakeDriver) Prepare(context.Context, []byte) error             { return nil }
func (f *fakeDriver) ValidateTemplate(types.MachineTemplate) error      { return nil }
func (f *fakeDriver) HostCapacity() types.Capacity                      { return types.Capacity{} }
func (f *fakeDriver) IsRemote() bool                                    { return false }
func (f *fakeDriver) List(context.Context) ([]types.Resource, error)    { return nil, nil }
func (f *fakeDriver) Deallocate(context.Context, *types.Resource) error { return nil }
func (f *fakeDriver) Status(context.Context, *types.Resource) (types.MachinePhase, error) {
	return "", ErrNotFound
}
func (f *fakeDriver) Allocate(context.Context, types.MachineTemplate, map[string]string) (*types.Resource, error) {
	return nil, nil
}

func fakeFactory(name string) Factory {
	return func(env Env) Driver { return &fakeDriver{name: name, env: env} }
}

func TestRegistryRegister(t *testing.T) {
	for _, tc := range []struct {
		name    string
		typ     string
		f       Factory
		wantErr string
	}{
		{"new type", "docker", fakeFactory("docker"), ""},
		{"duplicate", "test", fakeFactory("test"), `register driver "test": already registered`},
		{"empty type", "", fakeFactory("x"), "empty driver type"},
		{"blank type", "  ", fakeFactory("x"), "empty driver type"},
		{"nil factory", "native", nil, `register driver "native": nil factory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry()
			require.NoError(t, r.Register("test", fakeFactory("test")))
			err := r.Register(tc.typ, tc.f)
			if tc.wantErr == "" {
				require.NoError(t, err)
				assert.Contains(t, r.Types(), tc.typ)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			assert.Equal(t, []string{"test"}, r.Types(), "a failed Register changes nothing")
		})
	}
}

func TestRegistryNew(t *testing.T) {
	r := NewRegistry()
	for _, typ := range []string{"test", "docker", "native"} {
		require.NoError(t, r.Register(typ, fakeFactory(typ)))
	}
	require.NoError(t, r.Register("broken", func(Env) Driver { return nil }))
	assert.Equal(t, []string{"broken", "docker", "native", "test"}, r.Types())

	t.Run("fills instance and logger", func(t *testing.T) {
		d, err := r.New("docker", Env{NodeName: "n1", DataDir: "/tmp/x"})
		require.NoError(t, err)
		f := d.(*fakeDriver)
		assert.Equal(t, "docker", f.env.Instance)
		assert.Equal(t, "n1", f.env.NodeName)
		assert.Equal(t, "/tmp/x", f.env.DataDir)
		require.NotNil(t, f.env.Log)
	})
	t.Run("keeps given instance and logger", func(t *testing.T) {
		log := slog.New(slog.DiscardHandler)
		d, err := r.New("test", Env{Instance: "test/big", Log: log})
		require.NoError(t, err)
		f := d.(*fakeDriver)
		assert.Equal(t, "test/big", f.env.Instance)
		assert.Same(t, log, f.env.Log)
	})
	t.Run("unknown type lists the known ones", func(t *testing.T) {
		_, err := r.New("aws", Env{})
		require.ErrorIs(t, err, ErrUnknownType)
		assert.EqualError(t, err, `unknown driver type "aws" (known: broken, docker, native, test)`)
	})
	t.Run("empty registry", func(t *testing.T) {
		_, err := NewRegistry().New("aws", Env{})
		assert.EqualError(t, err, `unknown driver type "aws" (known: none)`)
	})
	t.Run("nil from factory", func(t *testing.T) {
		_, err := r.New("broken", Env{})
		assert.EqualError(t, err, `new driver "broken": factory returned nil`)
	})
}

func TestRegistryConcurrent(t *testing.T) {
	r := NewRegistry()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 50 {
			_ = r.Register(string(rune('a'+i%26))+"x", fakeFactory("x"))
		}
	}()
	for range 50 {
		_ = r.Types()
		_, _ = r.New("ax", Env{})
	}
	<-done
	assert.Len(t, r.Types(), 26)
}
