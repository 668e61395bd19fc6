package openapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Cluster tokens are Token objects, replicated like every kind: the bearer
// string is "<token name>.<secret>", the secret 32 random bytes (base64url),
// and the object keeps only HMAC-SHA256(salt, secret). The secret has 256
// bits, so no slow hash is needed against guessing: a check costs one
// store read of the token, one of its user and one HMAC.

// errBadToken is every failure that must not tell a caller more.
var errBadToken = errors.New("invalid bearer token")

// mintToken makes tok's secret, keeps its keyed hash in tok and returns the
// bearer string, shown once.
func mintToken(tok *types.Token) (string, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", fmt.Errorf("token secret: %w", err)
	}
	s := base64.RawURLEncoding.EncodeToString(secret)
	if err := hashToken(tok, s); err != nil {
		return "", err
	}
	return tok.Metadata.Name + "." + s, nil
}

// hashToken keeps in tok the keyed hash of secret, with a new salt.
func hashToken(tok *types.Token, secret string) error {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return fmt.Errorf("token salt: %w", err)
	}
	tok.Spec.Salt = hex.EncodeToString(salt)
	tok.Spec.Hash = hex.EncodeToString(tokenMAC(salt, secret))
	return nil
}

func tokenMAC(salt []byte, secret string) []byte {
	m := hmac.New(sha256.New, salt)
	m.Write([]byte(secret))
	return m.Sum(nil)
}

// clusterToken checks a bearer string against the cluster's Token objects:
// the token must exist with that secret, not have expired, and its user
// must exist (the very object it was made for, not one made again under
// the name), be enabled and still hold the token's role.
// It returns the token too, whose expiry a cached answer keeps checking.
func (a *authenticator) clusterToken(bearer string) (Principal, *types.Token, error) {
	name, secret, ok := strings.Cut(bearer, ".")
	if !ok || a.st == nil || types.ValidateName("name", name) != nil {
		return Principal{}, nil, errBadToken
	}
	tok, err := store.Get[types.Token](a.st, types.KindToken, name)
	if err != nil {
		return Principal{}, nil, errBadToken
	}
	salt, err1 := hex.DecodeString(tok.Spec.Salt)
	want, err2 := hex.DecodeString(tok.Spec.Hash)
	if err1 != nil || err2 != nil || len(want) != sha256.Size || !hmac.Equal(want, tokenMAC(salt, secret)) {
		return Principal{}, nil, errBadToken
	}
	if tok.ExpiredAt(a.now()) {
		return Principal{}, nil, tokenExpired(tok)
	}
	if tok.Spec.Role == types.RoleJoin {
		return Principal{Name: name, User: types.JoinUser, Role: types.RoleJoin}, tok, nil
	}
	user, err := store.Get[types.User](a.st, types.KindUser, tok.Spec.User)
	switch {
	case err != nil:
		return Principal{}, nil, fmt.Errorf("token %s: its user %s no longer exists", name, tok.Spec.User)
	case !tok.OfUser(user):
		// Deleted and made again: the new user does not inherit the tokens.
		return Principal{}, nil, fmt.Errorf("token %s: its user %s was deleted; the user of that name now is another", name, tok.Spec.User)
	case user.Spec.Disabled:
		return Principal{}, nil, fmt.Errorf("token %s: user %s is disabled", name, tok.Spec.User)
	case !user.HasRole(tok.Spec.Role):
		return Principal{}, nil, fmt.Errorf("token %s: user %s no longer has role %s", name, tok.Spec.User, tok.Spec.Role)
	}
	return Principal{Name: name, User: tok.Spec.User, Role: tok.Spec.Role}, tok, nil
}

func tokenExpired(tok *types.Token) error {
	return fmt.Errorf("token %s expired at %s", tok.Metadata.Name, tok.Spec.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z"))
}

// verifiedTokens remembers the cluster tokens found good, by the SHA-256 of
// the bearer string, so a client's requests after its first cost no store
// reads and no HMAC. An answer holds while no Token and no User record has
// changed since it was found (store.Writes, which moves before a write is
// acknowledged: a revoked token, a disabled user or a removed role is
// refused by the next request) and the token has not expired.
type verifiedTokens struct {
	mu  sync.Mutex
	gen uint64
	m   map[[sha256.Size]byte]verifiedToken
}

type verifiedToken struct {
	who Principal
	tok *types.Token // read-only
}

// maxVerifiedTokens bounds the memory of verifiedTokens; past it, the
// answers are forgotten and found again.
const maxVerifiedTokens = 4096

func (v *verifiedTokens) get(sum [sha256.Size]byte, gen uint64, now time.Time) (Principal, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if gen != v.gen {
		v.gen, v.m = gen, nil
	}
	e, ok := v.m[sum]
	if !ok || e.tok.ExpiredAt(now) {
		return Principal{}, false
	}
	return e.who, true
}

func (v *verifiedTokens) put(sum [sha256.Size]byte, gen uint64, e verifiedToken) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if gen != v.gen {
		return // a token or user changed since the check began: check again next time
	}
	if v.m == nil || len(v.m) >= maxVerifiedTokens {
		v.m = map[[sha256.Size]byte]verifiedToken{}
	}
	v.m[sum] = e
}

// prepareToken checks a new token against its user and mints its secret;
// the bearer string is returned for the one answer that shows it.
func (s *Server) prepareToken(o types.Object) (string, error) {
	tok, ok := o.(*types.Token)
	if !ok {
		return "", nil
	}
	if tok.Spec.Role == types.RoleJoin {
		return "", badRequest("spec.role", "join tokens are made by POST /api/v1/cluster/join-tokens (hf-cli cluster join-token)")
	}
	if tok.Spec.Hash != "" || tok.Spec.Salt != "" {
		return "", badRequest("spec.hash", "is made by the server: leave spec.hash and spec.salt out")
	}
	if !tok.Spec.UserCreatedAt.IsZero() {
		return "", badRequest("spec.userCreatedAt", "is set by the server: leave it out")
	}
	if tok.ExpiredAt(s.cfg.Now()) {
		return "", badRequest("spec.expiresAt", "is in the past")
	}
	user, err := store.Get[types.User](s.st, types.KindUser, tok.Spec.User)
	if errors.Is(err, store.ErrNotFound) {
		return "", badRequest("spec.user", "user %q does not exist: create it first", tok.Spec.User)
	}
	if err != nil {
		return "", err
	}
	if !user.HasRole(tok.Spec.Role) {
		return "", badRequest("spec.role", "user %q does not have role %q (it has %v)", tok.Spec.User, tok.Spec.Role, user.Spec.Roles)
	}
	tok.Spec.UserCreatedAt = user.Metadata.CreatedAt
	return mintToken(tok)
}

// errTokenImmutable answers a PUT of a token.
var errTokenImmutable = newErr(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "",
	"tokens cannot be changed: delete the token (which revokes it) and create another")

// NewBootstrapToken returns the bearer string of a new cluster's first
// admin token, for BootstrapAdmin. Its name is its own ("admin-" and six
// hex digits): a node that bootstraps by mistake (a wiped first node, say)
// adds a token rather than replacing the cluster's.
func NewBootstrapToken() (string, error) {
	suffix := make([]byte, 3)
	if _, err := rand.Read(suffix); err != nil {
		return "", err
	}
	tok := &types.Token{Metadata: types.ObjectMeta{Name: "admin-" + hex.EncodeToString(suffix)}}
	return mintToken(tok)
}

// BootstrapAdmin makes the cluster's first admin: the User "admin" with
// role admin and the admin Token of bearer (from NewBootstrapToken, or
// read back from where it was saved). The caller calls it on the first
// node of a new cluster only: one that joins no other and holds no users
// or tokens yet.
func BootstrapAdmin(st *store.Store, bearer string) error {
	name, secret, ok := strings.Cut(bearer, ".")
	if !ok || types.ValidateName("name", name) != nil || secret == "" {
		return errors.New("bootstrap admin: not a cluster token (name.secret)")
	}
	user := &types.User{Metadata: types.ObjectMeta{Name: AdminUser}, Spec: types.UserSpec{Roles: []string{RoleAdmin}}}
	types.SetKind(user, types.KindUser)
	tok := &types.Token{Metadata: types.ObjectMeta{Name: name}, Spec: types.TokenSpec{User: AdminUser, Role: RoleAdmin}}
	types.SetKind(tok, types.KindToken)
	if err := hashToken(tok, secret); err != nil {
		return err
	}
	if _, err := st.Put(user, store.PutOptions{}); err != nil {
		return fmt.Errorf("bootstrap admin: %w", err)
	}
	tok.Spec.UserCreatedAt = user.Metadata.CreatedAt
	if _, err := st.Put(tok, store.PutOptions{}); err != nil {
		return fmt.Errorf("bootstrap admin: %w", err)
	}
	return nil
}

// HasUsers reports whether the store holds any user or token: a node that
// finds some is not the first of a new cluster.
func HasUsers(st *store.Store) (bool, error) {
	found := false
	for _, kind := range []string{types.KindUser, types.KindToken} {
		err := st.Each(kind, func(store.Record) error {
			found = true
			return store.ErrStop
		})
		if err != nil || found {
			return found, err
		}
	}
	return false, nil
}
