package openapi

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func TestSpecIsValidOpenAPI(t *testing.T) {
	doc := loadSpec(t)
	assert.Equal(t, "3.0.3", doc.OpenAPI)
	require.NotNil(t, doc.Components.SecuritySchemes["bearerAuth"])
	assert.Equal(t, "bearer", doc.Components.SecuritySchemes["bearerAuth"].Value.Scheme)
	for _, kind := range types.Kinds() {
		assert.NotNil(t, doc.Components.Schemas[kind], kind)
		assert.NotNil(t, doc.Components.Schemas[kind+"List"], kind)
	}
	assert.NotNil(t, doc.Components.Schemas["Error"])
}

// TestSpecRoutesMatchGin fails when gin serves a route the spec lacks or the
// spec names a route gin does not serve.
func TestSpecRoutesMatchGin(t *testing.T) {
	doc := loadSpec(t)
	srv, err := New(Config{AdminToken: adminTok}, nil, openStore(t))
	require.NoError(t, err)

	gin := map[string]bool{}
	for _, r := range srv.Routes() {
		segs := strings.Split(r.Path, "/")
		for i, s := range segs {
			if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") {
				segs[i] = "{" + s[1:] + "}"
			}
		}
		gin[r.Method+" "+strings.Join(segs, "/")] = true
	}
	spec := map[string]bool{}
	for p, item := range doc.Paths.Map() {
		for m := range item.Operations() {
			spec[m+" "+p] = true
		}
	}
	for r := range gin {
		assert.True(t, spec[r], "gin serves %s, the spec does not name it", r)
	}
	for r := range spec {
		assert.True(t, gin[r], "the spec names %s, gin does not serve it", r)
	}
	// Every kind has its five routes.
	for _, kind := range types.Kinds() {
		p := "/api/v1/" + types.Plural(kind)
		for _, r := range []string{"GET " + p, "POST " + p, "GET " + p + "/{name}", "PUT " + p + "/{name}", "DELETE " + p + "/{name}"} {
			assert.True(t, gin[r], r)
		}
	}
}

// goFields lists the JSON paths of t ("spec.resources.cpu"); maps add ".*",
// slices "[]". Types that encode themselves are leaves.
func goFields(t reflect.Type, path string, out map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[types.FacetVersions]() {
		t = reflect.TypeFor[map[string]types.Version]() // its JSON form
	}
	if t == reflect.TypeFor[types.PhaseTimes]() {
		t = reflect.TypeFor[map[string]time.Time]() // its JSON form
	}
	if path != "" {
		out[path] = true
	}
	if isLeaf(t) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		for name, ft := range jsonFields(t) {
			goFields(ft, joinPath(path, name), out)
		}
	case reflect.Map:
		goFields(t.Elem(), path+".*", out)
	case reflect.Slice, reflect.Array:
		goFields(t.Elem(), path+"[]", out)
	}
}

// specFields lists the JSON paths of a schema the same way.
func specFields(s *openapi3.Schema, path string, out map[string]bool, depth int) {
	if depth > 20 {
		panic("schema nests deeper than 20: a cycle?")
	}
	if path != "" {
		out[path] = true
	}
	switch {
	case s.Type.Is("object") && len(s.Properties) > 0:
		for name, p := range s.Properties {
			specFields(p.Value, joinPath(path, name), out, depth+1)
		}
	case s.Type.Is("object") && s.AdditionalProperties.Schema != nil:
		specFields(s.AdditionalProperties.Schema.Value, path+".*", out, depth+1)
	case s.Type.Is("object") && s.AdditionalProperties.Has != nil && *s.AdditionalProperties.Has:
		// any value, like json.RawMessage
	case s.Type.Is("array"):
		specFields(s.Items.Value, path+"[]", out, depth+1)
	}
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestSpecSchemasMatchTypes compares every field of every kind (and of the
// list, error, watch event and whoami bodies) between lib/types and the spec, in
// both directions.
func TestSpecSchemasMatchTypes(t *testing.T) {
	doc := loadSpec(t)
	cases := map[string]reflect.Type{
		"Error":      reflect.TypeFor[ErrorBody](),
		"WatchEvent": reflect.TypeFor[WatchEvent](),
		"WhoAmI":     reflect.TypeFor[Principal](),
	}
	for _, kind := range types.Kinds() {
		obj, err := types.New(kind)
		require.NoError(t, err)
		cases[kind] = reflect.TypeOf(obj).Elem()
		cases[kind+"List"] = reflect.TypeFor[listBody]()
	}
	for name, typ := range cases {
		t.Run(name, func(t *testing.T) {
			ref := doc.Components.Schemas[name]
			require.NotNil(t, ref, "no schema %s", name)
			want, got := map[string]bool{}, map[string]bool{}
			goFields(typ, "", want)
			specFields(ref.Value, "", got, 0)
			if strings.HasSuffix(name, "List") {
				// listBody holds raw items; the spec types them.
				for k := range got {
					if strings.HasPrefix(k, "items[].") {
						delete(got, k)
					}
				}
			}
			assert.Equal(t, sortedSet(want), sortedSet(got))
		})
	}
}

// fullObjects returns one object of every kind with every field set, and
// checks that: a field added to lib/types without a value here fails the test.
func fullObjects(t testing.TB) []types.Object {
	t.Helper()
	ts := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	res := types.Resources{CPU: 2, RAMGB: 4, DiskGB: 10}
	ep := []types.Endpoint{{Protocol: "ssh", Address: "10.0.0.1:22"}}
	meta := func(name string) types.ObjectMeta {
		return types.ObjectMeta{Name: name, Labels: map[string]string{"team": "ci"}, Annotations: map[string]string{"note": "x"},
			Facets: types.FacetVersions{{Name: "spec", Version: types.Version{HLC: 1, Node: "n1"}}}}
	}
	pt := types.MakePhaseTimes(types.PhaseTime{Phase: "Requested", At: ts})
	conds := types.Conditions{{Type: "Ready", Status: types.ConditionTrue, LastUpdateTime: ts, LastTransitionTime: ts, Reason: "r", Message: "m"}}
	one, lo := 1.0, int64(1)
	def := "a"
	prop := types.Properties{{Name: "image", DataType: types.DataString, ValueType: types.ValueScalar, DisplayName: "Image", Required: true,
		Minimum: &one, Maximum: &one, MinLength: &lo, MaxLength: &lo, Format: "f", Pattern: "a", Enum: []string{"a"}, Default: &def, UniqueItems: true}}
	objs := []types.Object{
		&types.Node{TypeMeta: types.TypeMeta{APIVersion: types.APIVersion, Kind: types.KindNode}, Metadata: meta("n1"),
			Spec: types.NodeSpec{APIAddress: "127.0.0.1:1", GossipAddress: "127.0.0.1:2", Maintenance: true, SoftwareVersion: "v1",
				Drivers: []types.NodeDriver{{Name: "test", Driver: "test", Remote: true, Status: "ok",
					Capacity:      types.Capacity{Total: res, Usable: res, Overbook: res, Used: res, Reserved: res, Free: res},
					AllowedGroups: []string{"video"}}}},
			Status: types.NodeStatus{Phase: types.NodeUp, StartedAt: ts, Heartbeat: ts, Machines: 3,
				Down: &types.NodeVerdict{Reason: "gone", At: ts, By: "n2", Report: types.Version{HLC: 1, Node: "n1"}, Was: types.NodeUp}, Conditions: conds}},
		&types.Provider{TypeMeta: types.TypeMeta{APIVersion: types.APIVersion, Kind: types.KindProvider}, Metadata: meta("test"),
			Spec: types.ProviderSpec{Driver: "test", ConfigurationItems: prop, MachineInformation: prop}},
		&types.Environment{TypeMeta: types.TypeMeta{APIVersion: types.APIVersion, Kind: types.KindEnvironment}, Metadata: meta("lab"),
			Status: types.EnvironmentStatus{Conditions: conds},
			Spec: types.EnvironmentSpec{DisplayName: "Lab", MachineNamePrefix: "lab", Provider: "test", ProviderConfiguration: map[string]string{"image": "a"},
				TemplateSpecific: map[string]map[string]string{"small": {"image": "a"}}, Capacity: map[string]int{"small": 3},
				Endpoints: map[string]string{"ssh": "x"}, NodeSelector: map[string]string{"zone": "a"}, Placement: types.PlacementSpread}},
		&types.MachineTemplate{TypeMeta: types.TypeMeta{APIVersion: types.APIVersion, Kind: types.KindMachineTemplate}, Metadata: meta("small"),
			Spec: types.MachineTemplateSpec{DisplayName: "Small", MachineNamePrefix: "sm", MachineType: types.MachineTypeShared, Resources: res,
				ProviderConfiguration: map[string]json.RawMessage{"docker": json.RawMessage(`{"image":"alpine"}`)},
				ConnectProtocols:      []string{"ssh"}, AllowOverbook: true, OnNodeLoss: types.LostFail,
				ClaimMetadata: []types.MetadataKey{{Name: "a", Pattern: "b"}}}},
		&types.MachineSet{TypeMeta: types.TypeMeta{APIVersion: types.APIVersion, Kind: types.KindMachineSet}, Metadata: meta("pool"),
			Spec: types.MachineSetSpec{AvailabilityConfiguration: types.AvailabilityConfiguration{Availability: types.AvailabilityAccessCode, Value: "code"},
				Provider: "test", ProviderConfiguration: map[string]string{"image": "a"}, MachineNamePrefix: "p",
				ProvisioningStrategy: types.ProvisionAutoScale, MinAvailable: 1, MaxProvisioned: 2, MachineTemplate: "small", Environment: "lab",
				MaxIdle: types.D(time.Minute), MaxAssigned: types.D(time.Hour), MaxAge: types.D(2 * time.Hour)},
			Status: types.MachineSetStatus{Conditions: conds, Provisioned: 2, Available: 1}},
		&types.Machine{TypeMeta: types.TypeMeta{APIVersion: types.APIVersion, Kind: types.KindMachine}, Metadata: meta("m1"),
			Spec: types.MachineSpec{MachineType: types.MachineTypeUser, Provider: "test", ConfigurationOptions: map[string]string{"image": "x"},
				ConnectEndpoints: map[string]string{"ssh": "wss://gw"}, MachineSet: "pool", MachineTemplate: "small", Environment: "lab", Node: "n1", Driver: "test", Claim: "c1", Round: 2},
			Status: types.MachineStatus{Phase: types.MachineRunning, MachineInformation: map[string]string{"ip": "10.0.0.1"},
				Addresses: ep, Conditions: conds, Reason: "r", PhaseTimes: pt, LastActivity: ts, Paused: true,
				Reap:     &types.MachineRequest{Reason: "Stale", Message: "m", Claim: "c", At: ts, By: "n2"},
				Lost:     &types.MachineVerdict{Reason: "gone", At: ts, By: "n2", Owner: types.Version{HLC: 1, Node: "n1"}, Was: types.MachineRunning, WasReason: "r"},
				Resource: &types.Resource{ID: "id", Driver: "test", Info: map[string]string{"a": "b"}, Endpoints: ep, Resources: res, Data: json.RawMessage(`{"pid":1}`)}}},
		&types.MachineClaim{TypeMeta: types.TypeMeta{APIVersion: types.APIVersion, Kind: types.KindMachineClaim}, Metadata: meta("c1"),
			Spec: types.MachineClaimSpec{MachineTemplate: "small", User: "alice", AccessCode: "code", ScheduledEvent: "ev", Environment: "lab",
				BindStrategy: types.BindRequireMachineSets, MachineSets: []string{"pool"}, BindTimeout: types.D(time.Minute), Metadata: map[string]string{"a": "b"}},
			Status: types.MachineClaimStatus{Conditions: conds, Phase: types.ClaimBound, Machine: "m1", Node: "n1", Driver: "test", Round: 2, Reason: "r", PhaseTimes: pt,
				Election: &types.ClaimElection{Round: 2, Node: "n1", Driver: "test", Failed: true, Reason: "r", Rebinds: 1, RebindAt: ts, At: ts},
				Binding:  &types.ClaimBinding{Round: 2, Node: "n1", Driver: "test", Machine: "m1", Phase: types.BindingBound, Reason: "r", Shared: true, At: ts, Since: ts},
				End:      &types.ClaimEnd{Reason: "r", At: ts}}},
		&types.ScheduledEvent{TypeMeta: types.TypeMeta{APIVersion: types.APIVersion, Kind: types.KindScheduledEvent}, Metadata: meta("ev"),
			Spec: types.ScheduledEventSpec{DisplayName: "Ev", PrintingOption: types.PrintingEnabled, Scenarios: []string{"s1"}, Courses: []string{"c1"}, StartTime: ts, ProvisioningStartTime: ts.Add(-time.Hour), EndTime: ts.Add(time.Hour), ExpirationStrategy: types.ExpireSoft,
				RequiredMachines: []types.RequiredMachines{{MachineTemplate: "small", Count: 2, MachineType: types.MachineTypeUser,
					BindStrategy: types.BindAny, CreateMachineSet: &types.CreateMachineSet{MachineSetSpec: types.MachineSetSpec{
						AvailabilityConfiguration: types.AvailabilityConfiguration{Availability: types.AvailabilityScheduledEvent, Value: "ev"}, MachineTemplate: "small"}},
					MachineSets: []string{"pool"}}}, ExpectedUsers: 3},
			Status: types.ScheduledEventStatus{Conditions: conds, Phase: types.EventActive, CreatedMachineSets: []string{"pool"}}},
		&types.AccessCode{TypeMeta: types.TypeMeta{APIVersion: types.APIVersion, Kind: types.KindAccessCode}, Metadata: meta("code"),
			Spec:   types.AccessCodeSpec{Code: "let-me-in", Scenarios: []string{"s1"}, Courses: []string{"c1"}, Disabled: true, MachineSets: []string{"pool"}, ScheduledEvents: []string{"ev"}, NotBefore: ts, NotAfter: ts.Add(time.Hour)},
			Status: types.AccessCodeStatus{Status: types.AccessCodeActive, Conditions: conds}},
		&types.Session{TypeMeta: types.TypeMeta{APIVersion: types.APIVersion, Kind: types.KindSession}, Metadata: meta("s1"),
			Spec:   types.SessionSpec{Scenario: "s1", Course: "c1", PersistenceStrategy: types.NewPerScenario, User: "alice", AccessCode: "code", ScheduledEvent: "ev", MachineTemplate: "small", OnEnd: types.EndKeep, Timeout: types.D(time.Hour)},
			Status: types.SessionStatus{Phase: types.SessionPhaseActive, Conditions: conds, MachineClaim: "c1", Scenario: "s1"}},
		&types.User{TypeMeta: types.TypeMeta{APIVersion: types.APIVersion, Kind: types.KindUser}, Metadata: meta("alice"),
			Spec: types.UserSpec{DisplayName: "Alice", Roles: []string{RoleUser, RoleOperator}, Disabled: true}},
		&types.Token{TypeMeta: types.TypeMeta{APIVersion: types.APIVersion, Kind: types.KindToken}, Metadata: meta("alice-1"),
			Spec: types.TokenSpec{User: "alice", Role: RoleUser, ExpiresAt: ts, UserCreatedAt: ts, Hash: "00", Salt: "11"}},
	}
	var kinds []string
	for _, o := range objs {
		require.NoError(t, o.Validate(), o.GetKind())
		kinds = append(kinds, o.GetKind())
		b, err := json.Marshal(o)
		require.NoError(t, err)
		var generic any
		require.NoError(t, json.Unmarshal(b, &generic))
		fields := map[string]bool{}
		goFields(reflect.TypeOf(o).Elem(), "", fields)
		present := map[string]bool{}
		jsonPaths(generic, "", present)
		for f := range fields {
			if strings.HasPrefix(f, "metadata.createdAt") || strings.HasPrefix(f, "metadata.updatedAt") || strings.HasPrefix(f, "metadata.version") {
				continue // set by the store
			}
			if slices.ContainsFunc(legacyFields[o.GetKind()], func(l string) bool { return f == l || strings.HasPrefix(f, l+"[") || strings.HasPrefix(f, l+".") }) {
				continue // an earlier name, read and never written
			}
			assert.True(t, present[f], "%s: full object leaves %s empty", o.GetKind(), f)
		}
	}
	slices.Sort(kinds)
	require.Equal(t, types.Kinds(), kinds, "fullObjects must cover every kind")
	return objs
}

// legacyFields are the earlier names of fields, by kind: read (and moved
// to today's field by types.Upgrade), never written.
var legacyFields = map[string][]string{
	types.KindMachineTemplate: {"spec.connectProtocols"},
	types.KindMachineSet:      {"spec.availabilityConfiguration.type"},
	types.KindMachine:         {"status.connectEndpoints"},
	types.KindMachineClaim:    {"spec.machineSets"},
	types.KindScheduledEvent:  {"spec.requiredMachines[].machineSets"},
	types.KindAccessCode:      {"status.phase"},
}

// jsonPaths lists the paths present in a generic JSON value, as goFields names them.
func jsonPaths(v any, path string, out map[string]bool) {
	if path != "" {
		out[path] = true
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			jsonPaths(e, joinPath(path, k), out)
			if path != "" {
				jsonPaths(e, path+".*", out)
			}
		}
	case []any:
		for _, e := range x {
			jsonPaths(e, path+"[]", out)
		}
	}
}

// TestSpecDescribesFullObjects stores objects with every field set and reads them
// back through the API: each response is validated against the spec, whose
// schemas forbid unknown properties.
func TestSpecDescribesFullObjects(t *testing.T) {
	e := newTestEnv(t)
	for _, o := range fullObjects(t) {
		t.Run(o.GetKind(), func(t *testing.T) {
			_, err := e.st.Put(o, store.PutOptions{Create: true})
			require.NoError(t, err)
			r := e.do("GET", path(o.GetKind(), o.Meta().Name), adminTok, nil)
			require.Equal(t, 200, r.code, "%s", r.body)
			r = e.do("GET", path(o.GetKind()), adminTok, nil)
			require.Equal(t, 200, r.code)
			assert.Len(t, r.obj(t)["items"], 1)
			// A PUT of the stored object round-trips (the spec accepts it as a request).
			r = e.do("PUT", path(o.GetKind(), o.Meta().Name), adminTok, json.RawMessage(e.do("GET", path(o.GetKind(), o.Meta().Name), adminTok, nil).body))
			want := 200
			if o.GetKind() == types.KindToken {
				want = 405 // tokens cannot be changed
			}
			require.Equal(t, want, r.code, "%s", r.body)
		})
	}
	// Every error code the API writes is in the spec's enum.
	doc := loadSpec(t)
	codes := doc.Components.Schemas["Error"].Value.Properties["error"].Value.Properties["code"].Value.Enum
	for _, c := range []string{CodeBadRequest, CodeInvalid, CodeUnauthorized, CodeForbidden, CodeNotFound,
		CodeMethodNotAllowed, CodeConflict, CodeTooLarge, CodeUnavailable, CodeInternal} {
		assert.Contains(t, codes, any(c), fmt.Sprintf("code %s", c))
	}
}

// TestPresentDecodedIsAssembled: a list or stream that decoded a record to
// filter it presents the object it decoded; the bytes must be the ones the
// record assembles, for every kind with every field set.
func TestPresentDecodedIsAssembled(t *testing.T) {
	st, err := store.Open(store.Config{InMemory: true, NodeID: "n1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	defer st.Close()
	admin := Principal{Name: "admin", User: "admin", Role: RoleAdmin}
	for _, o := range fullObjects(t) {
		rec, err := st.Put(o, store.PutOptions{})
		require.NoError(t, err)
		require.Nil(t, rec.Data, "a write's record carries its facets only")
		obj, err := store.Decode(rec)
		require.NoError(t, err)
		decoded, err := present(admin, rec, obj)
		require.NoError(t, err)
		assembled, err := present(admin, rec, nil)
		require.NoError(t, err)
		assert.Equal(t, string(assembled), string(decoded), rec.Kind)
	}
}
