package openapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	fastjson "github.com/goccy/go-json"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Roles of a token (see types.Roles).
const (
	RoleAdmin    = types.RoleAdmin
	RoleOperator = types.RoleOperator
	RoleUser     = types.RoleUser
)

// AdminUser is the user name of the admin token from Config.AdminToken.
const AdminUser = "admin"

// Token is one static bearer token of this node's configuration (the
// cluster's own tokens are Token objects, see tokens.go).
type Token struct {
	// Name identifies the token in logs and /whoami (never the secret).
	Name string `json:"name" mapstructure:"name"`
	// Token is the secret the client sends as "Authorization: Bearer <token>".
	Token string `json:"token" mapstructure:"token"`
	// Role is RoleAdmin, RoleOperator or RoleUser.
	Role string `json:"role" mapstructure:"role"`
	// User is who the token acts as: spec.user of the user's claims and sessions.
	// Required for RoleUser.
	User string `json:"user" mapstructure:"user"`
}

// Principal is the caller of a request, as /api/v1/whoami shows it.
type Principal struct {
	Name string `json:"name"`
	User string `json:"user"`
	Role string `json:"role"`
}

// IsAdmin reports whether p may do everything, users and tokens included.
func (p Principal) IsAdmin() bool { return p.Role == RoleAdmin }

// Staff reports whether p runs the fleet (an admin or an operator): sees
// every object and writes every kind but users and tokens.
func (p Principal) Staff() bool { return p.Role == RoleAdmin || p.Role == RoleOperator }

// adminKind reports whether only admins read and write kind.
func adminKind(kind string) bool { return kind == types.KindUser || kind == types.KindToken }

// mayWrite reports whether p may create, change or delete objects of kind
// at all (a user: only its own claims and sessions).
func (p Principal) mayWrite(kind string) bool {
	if adminKind(kind) {
		return p.IsAdmin()
	}
	return p.Staff() || ownedKind(kind)
}

type tokenEntry struct {
	sum [sha256.Size]byte
	who Principal
}

// authenticator checks bearer tokens: the static ones of the node's config
// in constant time (the sent token is hashed and compared with every known
// hash, so neither its length nor which token it resembles shows in the
// timing), then the cluster's Token objects (tokens.go).
type authenticator struct {
	tokens []tokenEntry
	st     *store.Store
	now    func() time.Time
	// verified holds the cluster tokens checked lately (see verifiedTokens).
	verified verifiedTokens
}

func newAuthenticator(admin string, tokens []Token, st *store.Store, now func() time.Time) (*authenticator, error) {
	a := &authenticator{st: st, now: now}
	seen := map[[sha256.Size]byte]string{}
	add := func(t Token) error {
		switch {
		case t.Token == "":
			return fmt.Errorf("token %q: empty secret", t.Name)
		case !slices.Contains(types.Roles, t.Role):
			return fmt.Errorf("token %q: role must be one of %v, got %q", t.Name, types.Roles, t.Role)
		case t.Role == RoleUser && t.User == "":
			return fmt.Errorf("token %q: role user needs a user", t.Name)
		}
		sum := sha256.Sum256([]byte(t.Token))
		if other, ok := seen[sum]; ok {
			return fmt.Errorf("token %q: same secret as token %q", t.Name, other)
		}
		seen[sum] = t.Name
		user := t.User
		if user == "" {
			user = t.Name
		}
		a.tokens = append(a.tokens, tokenEntry{sum: sum, who: Principal{Name: t.Name, User: user, Role: t.Role}})
		return nil
	}
	if admin != "" {
		if err := add(Token{Name: AdminUser, Token: admin, Role: RoleAdmin, User: AdminUser}); err != nil {
			return nil, err
		}
	}
	for _, t := range tokens {
		if err := add(t); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// lookup returns the principal of the token: a static one (every entry is
// checked) or a cluster Token; the error says why not, as the caller may
// be told.
func (a *authenticator) lookup(token string) (Principal, error) {
	sum := sha256.Sum256([]byte(token))
	var found Principal
	ok := 0
	for i := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], a.tokens[i].sum[:]) == 1 {
			found = a.tokens[i].who
			ok = 1
		}
	}
	if ok == 1 {
		return found, nil
	}
	if a.st == nil {
		return Principal{}, errBadToken
	}
	// The generation is read before the store, so a write to a token or a
	// user that lands during the check makes the next lookup check again.
	gen := a.st.Writes(types.KindToken) + a.st.Writes(types.KindUser)
	now := a.now()
	if p, ok := a.verified.get(sum, gen, now); ok {
		return p, nil
	}
	p, tok, err := a.clusterToken(token)
	if err == nil {
		a.verified.put(sum, gen, verifiedToken{who: p, tok: tok})
	}
	return p, err
}

const (
	principalKey = "hf.principal"
	// tokenKey holds the request's bearer token, for a stream ticket.
	tokenKey = "hf.token"
	// byTicketKey is true when a stream ticket authenticated the request.
	byTicketKey = "hf.byTicket"
)

// authenticate is the middleware of every /api route.
func (s *Server) authenticate(c *gin.Context) {
	h := c.GetHeader("Authorization")
	scheme, token, _ := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	byTicket := false
	if ticket := c.Query("ticket"); h == "" && ticket != "" {
		if !isStream(c) {
			s.writeErr(c, newErr(http.StatusUnauthorized, CodeUnauthorized, "ticket", "a stream ticket opens event streams only (watch=true, /api/v1/events); send a bearer token"))
			return
		}
		t, ok := s.tickets.redeem(ticket)
		if !ok {
			s.writeErr(c, newErr(http.StatusUnauthorized, CodeUnauthorized, "ticket", "unknown, used or expired stream ticket; get a new one (POST %s%s)", apiPrefix, streamTicketsPath))
			return
		}
		scheme, token, byTicket = "Bearer", t, true
	}
	if (h == "" && !byTicket) || !strings.EqualFold(scheme, "Bearer") || token == "" {
		s.writeErr(c, newErr(http.StatusUnauthorized, CodeUnauthorized, "", "missing bearer token"))
		return
	}
	p, err := s.auth.lookup(token)
	if err != nil {
		s.writeErr(c, newErr(http.StatusUnauthorized, CodeUnauthorized, "", "%v", err))
		return
	}
	if p.Role == types.RoleJoin && c.FullPath() != apiPrefix+clusterJoinPath {
		s.writeErr(c, forbidden("", "a join token may only join a node (POST %s%s)", apiPrefix, clusterJoinPath))
		return
	}
	c.Set(principalKey, p)
	c.Set(tokenKey, token)
	c.Set(byTicketKey, byTicket)
	c.Next()
}

func principal(c *gin.Context) Principal {
	p, _ := c.Get(principalKey)
	who, _ := p.(Principal)
	return who
}

// Access rules of role user, as pure functions of (principal, kind, object).

// ownedKinds are the kinds a user owns through spec.user.
func ownedKind(kind string) bool {
	return kind == types.KindMachineClaim || kind == types.KindSession
}

// reservedMeta refuses labels and annotations under types.ReservedPrefix, for a
// user's write (403 naming the key).
func reservedMeta(m *types.ObjectMeta) error {
	for _, kv := range []struct {
		field string
		m     map[string]string
	}{{"metadata.labels", m.Labels}, {"metadata.annotations", m.Annotations}} {
		for _, k := range slices.Sorted(maps.Keys(kv.m)) {
			// In any case: "HF/access-code" would read as the system's too.
			if strings.HasPrefix(strings.ToLower(k), types.ReservedPrefix) {
				return forbidden(kv.field+"."+k, "keys under %q are written by the system or an admin only", types.ReservedPrefix)
			}
		}
	}
	return nil
}

// canRead reports whether p may list, get or watch kind at all.
func canRead(p Principal, kind string) bool {
	switch {
	case adminKind(kind):
		return p.IsAdmin()
	case kind == types.KindAccessCode:
		return p.Staff()
	}
	return true
}

func setOwner(o types.Object, user string) {
	switch v := o.(type) {
	case *types.MachineClaim:
		v.Spec.User = user
	case *types.Session:
		v.Spec.User = user
	}
}

// privateKind reports whether a user sees only their own objects of kind:
// claims and sessions (by spec.user) and machines (those their claims are
// bound to, shared ones included).
func privateKind(kind string) bool { return ownedKind(kind) || kind == types.KindMachine }

// sight is what one principal may see, for one request or stream: admins
// everything, operators everything but users and tokens, users every object of a readable kind but the claims and
// sessions of other users and the machines of other users' claims.
type sight struct {
	p      Principal
	claims func() ([]*types.MachineClaim, error) // the user's
	// machines counts, for each machine, the user's claims that name it,
	// and byClaim is each such claim's machine: loaded when first needed,
	// then kept up to date by claimChanged (a stream's sight follows the
	// claims as they change instead of listing them all again).
	machines map[string]int
	byClaim  map[string]string
}

func (s *Server) sight(p Principal) *sight {
	return &sight{p: p, claims: func() ([]*types.MachineClaim, error) { return s.userClaims(p.User) }}
}

// claimsOfWait bounds the wait for the node's index to catch up with the
// store; past it the claims are read from the store.
const claimsOfWait = 2 * time.Second

// userClaims are user's claims, read only: see ownedBy. (Each user's claim
// create, machine read and stream read and decoded every claim of the
// store: ~1 s on a node of 40,000.)
func (s *Server) userClaims(user string) ([]*types.MachineClaim, error) {
	return ownedBy(s, s.cfg.ClaimsOf, types.KindMachineClaim, user, func(c *types.MachineClaim) string { return c.Spec.User })
}

// sessionsOf returns user's sessions, read only: see ownedBy.
func (s *Server) sessionsOf(user string) ([]*types.Session, error) {
	return ownedBy(s, s.cfg.SessionsOf, types.KindSession, user, func(se *types.Session) string { return se.Spec.User })
}

// ownedBy returns user's objects of kind (owner says whose one is), read
// only: from the node's index (of, when it has one) once it has caught up
// with the store, else every object of the kind read from the store.
func ownedBy[T any, PT interface {
	*T
	types.Object
}](s *Server, of func(context.Context, string) ([]PT, error), kind, user string, owner func(PT) string) ([]PT, error) {
	if of != nil {
		ctx, cancel := context.WithTimeout(context.Background(), claimsOfWait)
		defer cancel()
		if objs, err := of(ctx, user); err == nil {
			return objs, nil
		}
	}
	all, err := store.List[T, PT](s.st, kind)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(o PT) bool { return owner(o) != user }), nil
}

// sees reports whether the principal may see o.
func (v *sight) sees(o types.Object) bool {
	if !canRead(v.p, o.GetKind()) {
		return false
	}
	if v.p.Staff() {
		return true
	}
	if owner, ok := types.UserOf(o); ok {
		return owner == v.p.User
	}
	if m, ok := o.(*types.Machine); ok {
		return v.userMachines()[m.Metadata.Name] > 0
	}
	return true
}

// boundTo reports whether the user holds a Bound claim on machine now: a
// shell or a machine's output is theirs only while it serves them (a
// claim of theirs that ended may still name a machine that now serves
// someone else).
func (v *sight) boundTo(machine string) bool {
	if v.p.Staff() {
		return true
	}
	claims, err := v.claims()
	if err != nil {
		return false
	}
	for _, c := range claims {
		if c.Spec.User == v.p.User && c.Status.Machine == machine && c.Status.Phase == types.ClaimBound {
			return true
		}
	}
	return false
}

// forget drops what the sight holds of the user's machines: the next look
// reads the user's claims again (after a stream missed their changes).
func (v *sight) forget() { v.machines, v.byClaim = nil, nil }

// loaded reports whether the sight holds the user's machines: until it
// does, claim changes need not be told (the first look reads the claims as
// they are then).
func (v *sight) loaded() bool { return v.machines != nil }

// claimChanged tells a loaded sight that claim name changed: c is the claim
// now, nil when it is gone.
func (v *sight) claimChanged(name string, c *types.MachineClaim) {
	if !v.loaded() {
		return
	}
	if old, ok := v.byClaim[name]; ok {
		delete(v.byClaim, name)
		if v.machines[old]--; v.machines[old] <= 0 {
			delete(v.machines, old)
		}
	}
	if c != nil && c.Spec.User == v.p.User && c.Status.Machine != "" {
		v.byClaim[name] = c.Status.Machine
		v.machines[c.Status.Machine]++
	}
}

// userMachines are the machines the user's claims are or were bound to.
func (v *sight) userMachines() map[string]int {
	if v.machines != nil {
		return v.machines
	}
	v.machines, v.byClaim = map[string]int{}, map[string]string{}
	claims, err := v.claims()
	if err != nil {
		return v.machines
	}
	for _, c := range claims {
		v.claimChanged(c.Metadata.Name, c)
	}
	return v.machines
}

// present is rec as the principal may read it: nobody sees a token's hash;
// a user does not see the secrets of access codes (a claim's or session's
// spec.accessCode) nor which code or event a set, or a set an event
// creates, is reserved for. obj is rec decoded, or nil.
func present(p Principal, rec store.Record, obj types.Object) (json.RawMessage, error) {
	switch {
	case rec.Kind == types.KindToken:
	case p.Staff() || (rec.Kind != types.KindMachineClaim && rec.Kind != types.KindSession && rec.Kind != types.KindMachineSet && rec.Kind != types.KindScheduledEvent):
		if rec.Data == nil && obj != nil {
			// Decoded already (a list's or a stream's filter): encoding it
			// gives the bytes rec.JSON would, without decoding it again.
			return fastjson.Marshal(obj)
		}
		return rec.JSON()
	}
	if obj == nil {
		var err error
		if obj, err = store.Decode(rec); err != nil {
			return nil, err
		}
	}
	// obj may be shared (a stream's event): the secrets are blanked in a
	// copy. Only strings of the top-level structs change, so a shallow copy
	// does.
	switch v := obj.(type) {
	case *types.MachineClaim:
		c := *v
		c.Spec.AccessCode = ""
		obj = &c
	case *types.Session:
		c := *v
		c.Spec.AccessCode = ""
		obj = &c
	case *types.MachineSet:
		c := *v
		c.Spec.AvailabilityConfiguration.Value = ""
		obj = &c
	case *types.ScheduledEvent:
		// The sets it creates say what they are reserved for, as sets do.
		c := *v
		c.Spec.RequiredMachines = slices.Clone(v.Spec.RequiredMachines)
		for i, line := range c.Spec.RequiredMachines {
			if line.CreateMachineSet != nil {
				cs := *line.CreateMachineSet
				cs.AvailabilityConfiguration.Value = ""
				c.Spec.RequiredMachines[i].CreateMachineSet = &cs
			}
		}
		obj = &c
	case *types.Token:
		c := *v
		c.Spec.Hash, c.Spec.Salt = "", ""
		obj = &c
	}
	return json.Marshal(obj)
}
