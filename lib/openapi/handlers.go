package openapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// writeTries bounds the read-modify-write retries of update and delete when the
// client gave no version and an owner wrote the object in between.
const writeTries = 10

const contentJSON = "application/json; charset=utf-8"

// listBody is the JSON of a list response.
type listBody struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Continue   string            `json:"continue,omitempty"`
	Items      []json.RawMessage `json:"items"`
}

// maxListLimit is the largest page a list may ask for.
const maxListLimit = 10000

// pageParams reads ?limit= and ?continue=: limit 0 means no limit; after is
// the name the page starts after ("" from the start).
func pageParams(c *gin.Context) (limit int, after string, err error) {
	if v := c.Query("limit"); v != "" {
		limit, err = strconv.Atoi(v)
		if err != nil || limit < 1 || limit > maxListLimit {
			return 0, "", badRequest("limit", "want a whole number from 1 to %d, got %q", maxListLimit, v)
		}
	}
	after = c.Query("continue")
	if after != "" && types.ValidateName("continue", after) != nil {
		return 0, "", badRequest("continue", "not a continue token of this API: %q", after)
	}
	return limit, after, nil
}

func (k kindRoutes) list(c *gin.Context) {
	s, p := k.s, principal(c)
	if !canRead(p, k.kind) {
		s.writeErr(c, forbidden("", "role %s may not read %s", p.Role, types.Plural(k.kind)))
		return
	}
	sel, err := parseSelectors(c.Query("labelSelector"), c.Query("fieldSelector"), []string{k.kind})
	if err != nil {
		s.writeErr(c, err)
		return
	}
	if w := c.Query("watch"); w != "" {
		on, err := strconv.ParseBool(w)
		if err != nil {
			s.writeErr(c, badRequest("watch", "want true or false, got %q", w))
			return
		}
		if on {
			s.stream(c, p, []string{k.kind}, sel)
			return
		}
	}
	limit, after, err := pageParams(c)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	items := []json.RawMessage{}
	sight := s.sight(p)
	next, lastName := "", ""
	// A page reads from where the last one ended (the store lists in name
	// order) up to the first object past the page: paging through a kind
	// reads it once, not once per page.
	err = s.st.EachAfter(k.kind, after, func(rec store.Record) error {
		obj, err := store.Decode(rec)
		if err != nil {
			// One unreadable record must not take the whole list down.
			s.log.Warn("list: undecodable record", "kind", rec.Kind, "name", rec.Name, "err", err)
			return nil
		}
		if !sight.sees(obj) || !sel.matches(obj) {
			return nil
		}
		if limit > 0 && len(items) == limit {
			next = lastName
			return store.ErrStop
		}
		data, err := s.presentView(p, rec, obj)
		if err != nil {
			return err
		}
		items = append(items, data)
		lastName = rec.Name
		return nil
	})
	if err != nil {
		s.writeErr(c, err)
		return
	}
	body, err := listBody{APIVersion: types.APIVersion, Kind: k.kind + "List", Continue: next, Items: items}.encode()
	if err != nil {
		s.writeErr(c, err)
		return
	}
	c.Data(http.StatusOK, contentJSON, body)
}

// encode is the list's JSON with its items as they are: each is one
// object's JSON as present made it. encoding/json (gin's c.JSON) validated
// and compacted every item again: 6.6 % of a node's CPU while a client
// listed 10,000 claims during a burst.
func (l listBody) encode() ([]byte, error) {
	items := l.Items
	l.Items = nil
	head, err := json.Marshal(l) // {"apiVersion":...,"items":null}
	if err != nil {
		return nil, err
	}
	head, ok := bytes.CutSuffix(head, []byte("null}"))
	if !ok {
		return nil, fmt.Errorf("list body %q does not end with its items", head)
	}
	size := len(head) + 2 + len(items)
	for _, it := range items {
		size += len(it)
	}
	out := make([]byte, 0, size)
	out = append(append(out, head...), '[')
	for i, it := range items {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, it...)
	}
	return append(out, ']', '}'), nil
}

// load reads kind/name as p may see it: 404 for what does not exist and for the
// claims and sessions of other users.
func (k kindRoutes) load(p Principal, name string) (store.Record, types.Object, error) {
	if types.ValidateName("name", name) != nil {
		// No object has such a name; and the store need not see a key it may refuse.
		return store.Record{}, nil, notFound(k.kind, name)
	}
	rec, err := k.s.st.Get(k.kind, name)
	if errors.Is(err, store.ErrNotFound) {
		return store.Record{}, nil, notFound(k.kind, name)
	}
	if err != nil {
		return store.Record{}, nil, err
	}
	obj, err := store.Decode(rec)
	if err != nil {
		return store.Record{}, nil, err
	}
	if !k.s.sight(p).sees(obj) {
		return store.Record{}, nil, notFound(k.kind, name)
	}
	return rec, obj, nil
}

func (k kindRoutes) get(c *gin.Context) {
	s, p := k.s, principal(c)
	if !canRead(p, k.kind) {
		s.writeErr(c, forbidden("", "role %s may not read %s", p.Role, types.Plural(k.kind)))
		return
	}
	rec, obj, err := k.load(p, c.Param("name"))
	if err != nil {
		s.writeErr(c, err)
		return
	}
	data, err := s.presentView(p, rec, obj)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	c.Data(http.StatusOK, contentJSON, data)
}

// writeRecord answers with the object JSON of rec, as the request's
// principal may read it.
func (s *Server) writeRecord(c *gin.Context, status int, rec store.Record) {
	data, err := present(principal(c), rec, nil)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	c.Data(status, contentJSON, data)
}

// decodeBody reads, decodes and checks the request's object.
func (k kindRoutes) decodeBody(c *gin.Context) (types.Object, error) {
	body, err := readBody(c.Writer, c.Request, k.s.cfg.BodyTimeout)
	if err != nil {
		return nil, err
	}
	return decodeObject(k.kind, body)
}

func (k kindRoutes) create(c *gin.Context) {
	s, p := k.s, principal(c)
	if !p.mayWrite(k.kind) {
		s.writeErr(c, forbidden("", "role %s may not create %s", p.Role, types.Plural(k.kind)))
		return
	}
	if k.kind == types.KindNode {
		s.writeErr(c, errNodeCreate)
		return
	}
	obj, err := k.decodeBody(c)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	if n := obj.Meta().Name; types.ValidateName("name", n) == nil {
		c.Set(auditNameKey, n)
	}
	prepareCreate(obj)
	if err := checkMachineCreate(obj); err != nil {
		s.writeErr(c, err)
		return
	}
	if !p.Staff() {
		if err := reservedMeta(obj.Meta()); err != nil {
			s.writeErr(c, err)
			return
		}
		switch owner, _ := types.UserOf(obj); owner {
		case "":
			setOwner(obj, p.User)
		case p.User:
		default:
			s.writeErr(c, forbidden("spec.user", "must be your user %q", p.User))
			return
		}
	}
	if err := validate(obj); err != nil {
		s.writeErr(c, err)
		return
	}
	if err := s.checkGrant(p, obj); err != nil {
		s.writeErr(c, err)
		return
	}
	// One user's creates on this node are counted one at a time, so
	// concurrent ones cannot all pass the cap.
	defer s.lockUserQuota(p, obj)()
	if err := s.checkClaimQuota(p, obj); err != nil {
		s.writeErr(c, err)
		return
	}
	if err := s.checkEventWindow(obj); err != nil {
		s.writeErr(c, err)
		return
	}
	if err := s.checkContent(obj); err != nil {
		s.writeErr(c, err)
		return
	}
	if warn, err := s.checkEventCapacity(obj, c.Query("capacityCheck")); err != nil {
		s.writeErr(c, err)
		return
	} else if warn != "" {
		c.Header("Warning", warning(warn))
	}
	bearer, err := s.prepareToken(obj)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	rec, err := s.st.Put(obj, store.PutOptions{Create: true})
	if err != nil {
		s.writeErr(c, err)
		return
	}
	if bearer != "" {
		s.writeToken(c, rec, bearer)
		return
	}
	s.writeRecord(c, http.StatusCreated, rec)
}

// writeToken answers the creation of a token: the token as everyone reads
// it, plus its bearer string under "token", this once.
func (s *Server) writeToken(c *gin.Context, rec store.Record, bearer string) {
	data, err := present(principal(c), rec, nil)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(data, &body); err != nil {
		s.writeErr(c, err)
		return
	}
	body["token"], _ = json.Marshal(bearer)
	c.JSON(http.StatusCreated, body)
}

// checkContent runs the checks of an object's content against the objects
// it refers to, for a create and an update alike: claim metadata against
// its template, provider configuration against the Provider's items (and
// the node's drivers), native groups against the nodes' reports, an access
// code's secret against the others'.
func (s *Server) checkContent(obj types.Object) error {
	for _, check := range []func(types.Object) error{s.checkClaimMetadata, s.checkConfiguration, s.checkGroups, s.checkCodeUnique} {
		if err := check(obj); err != nil {
			return err
		}
	}
	return nil
}

func validate(obj types.Object) error {
	if err := obj.Validate(); err != nil {
		return err
	}
	return validateClientStatus(obj)
}

func (k kindRoutes) update(c *gin.Context) {
	s, p := k.s, principal(c)
	if !p.mayWrite(k.kind) || (!p.Staff() && k.kind != types.KindMachineClaim) {
		s.writeErr(c, forbidden("", "role %s may not update %s", p.Role, types.Plural(k.kind)))
		return
	}
	if k.kind == types.KindToken {
		s.writeErr(c, errTokenImmutable)
		return
	}
	name := c.Param("name")
	body, err := readBody(c.Writer, c.Request, s.cfg.BodyTimeout)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	obj, err := decodeObject(k.kind, body)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	switch n := obj.Meta().Name; n {
	case "":
		obj.Meta().Name = name
	case name:
	default:
		s.writeErr(c, badRequest("metadata.name", "is %q but the path names %q", n, name))
		return
	}
	want, err := precondition(c.GetHeader("If-Match"), obj.Meta().Version)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	if claim, ok := obj.(*types.MachineClaim); ok && claim.Status.Phase == types.ClaimTerminated {
		if done := k.terminate(c, p, name, want); done {
			return
		}
	}
	if !p.Staff() {
		s.writeErr(c, forbidden("", "role %s may only terminate its machineclaims (status.phase Terminated)", p.Role))
		return
	}
	if u, ok := obj.(*types.User); ok && !enabledAdmin(u) {
		// It may take an admin away: one node decides those (users.go).
		// What this node can tell without it, it tells.
		if types.ValidateName("name", name) != nil {
			s.writeErr(c, notFound(k.kind, name))
			return
		}
		if err := validate(obj); err != nil {
			s.writeErr(c, err)
			return
		}
		out, err := s.changeUser(c.Request.Context(), userChange{Name: name, Version: want, Body: body})
		if err != nil {
			s.writeErr(c, err)
			return
		}
		s.writeRecord(c, http.StatusOK, out)
		return
	}
	out, warn, err := k.put(p, name, obj, body, want, c.Query("capacityCheck"))
	if err != nil {
		s.writeErr(c, err)
		return
	}
	if warn != "" {
		c.Header("Warning", warning(warn))
	}
	s.writeRecord(c, http.StatusOK, out)
}

// put writes body, an update of object name, over the stored object as p
// may see it, at version want (zero: whatever it is, read again and
// written again while an owner writes it in between). obj is body decoded
// with its name set, or nil when the caller has not decoded it.
// capacityCheck is the request's ?capacityCheck= (an event's); warn, what
// it has to say.
func (k kindRoutes) put(p Principal, name string, obj types.Object, body []byte, want types.Version, capacityCheck string) (_ store.Record, warn string, _ error) {
	s := k.s
	for try := 0; ; try++ {
		if obj == nil || try > 0 {
			// keepFixed filled in what the body left out from the object
			// read then: each try starts again from the body.
			var err error
			if obj, err = decodeObject(k.kind, body); err != nil {
				return store.Record{}, "", err
			}
			obj.Meta().Name = name
		}
		rec, stored, err := k.load(p, name)
		if err != nil {
			return store.Record{}, "", err
		}
		prepareUpdate(obj, stored)
		if err := keepFixed(obj, stored); err != nil {
			return store.Record{}, "", err
		}
		if err := validate(obj); err != nil {
			return store.Record{}, "", err
		}
		if err := s.checkEventSet(obj, stored); err != nil {
			return store.Record{}, "", err
		}
		if err := s.checkAdminKept(obj, stored); err != nil {
			return store.Record{}, "", err
		}
		if err := s.checkContent(obj); err != nil {
			return store.Record{}, "", err
		}
		warn, err := s.checkEventCapacityUpdate(obj, stored, capacityCheck)
		if err != nil {
			return store.Record{}, "", err
		}
		// Written over what was just read, and only the API's own facets: a
		// status its owner wrote meanwhile is neither a conflict nor undone.
		out, err := s.st.Put(obj, store.PutOptions{Update: true, IfVersion: want, Base: &rec, Facets: apiFacets(k.kind)})
		if errors.Is(err, store.ErrConflict) && want.IsZero() && try < writeTries {
			continue
		}
		return out, warn, err
	}
}

// warning is the value of a Warning header carrying msg.
func warning(msg string) string {
	return `199 hf "` + strings.ReplaceAll(msg, `"`, `'`) + `"`
}

// terminate ends claim name as the proposal has a user do it, by setting
// its phase to Terminated: it writes the claim's end facet (its node then
// releases the machine) and answers with the claim; nothing else of the
// body is written. With a version (If-Match or metadata.version), the
// claim must still be at it (409). A claim already Terminated is left to
// the update as usual (done is false) for an admin, and answered as it is
// for a user.
func (k kindRoutes) terminate(c *gin.Context, p Principal, name string, want types.Version) (done bool) {
	s := k.s
	rec, stored, err := k.load(p, name)
	if err != nil {
		s.writeErr(c, err)
		return true
	}
	if !want.IsZero() && rec.Version != want {
		s.writeErr(c, store.ErrConflict)
		return true
	}
	if stored.(*types.MachineClaim).Status.Phase == types.ClaimTerminated {
		if p.Staff() {
			return false
		}
		s.writeRecord(c, http.StatusOK, rec)
		return true
	}
	who := p.User
	if p.Staff() {
		who = "an " + p.Role
	}
	_, err = store.UpdateFacet(s.st, types.KindMachineClaim, name, types.FacetEnd, func(o *types.MachineClaim) error {
		if o.Status.End != nil {
			return store.ErrNoChange
		}
		o.Status.End = &types.ClaimEnd{Reason: "terminated by " + who, At: s.cfg.Now()}
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNoChange) {
		s.writeErr(c, err)
		return true
	}
	out, err := s.st.Get(k.kind, name)
	if err != nil {
		s.writeErr(c, err)
		return true
	}
	s.writeRecord(c, http.StatusOK, out)
	return true
}

func (k kindRoutes) delete(c *gin.Context) {
	s, p := k.s, principal(c)
	if !p.mayWrite(k.kind) {
		s.writeErr(c, forbidden("", "role %s may not delete %s", p.Role, types.Plural(k.kind)))
		return
	}
	want, err := parseIfMatch(c.GetHeader("If-Match"))
	if err != nil {
		s.writeErr(c, err)
		return
	}
	name := c.Param("name")
	force := false
	if v := c.Query("force"); v != "" && k.kind == types.KindNode {
		if force, err = strconv.ParseBool(v); err != nil {
			s.writeErr(c, badRequest("force", "want true or false, got %q", v))
			return
		}
	}
	if k.kind == types.KindUser {
		cascade := false
		if v := c.Query("cascade"); v != "" {
			if cascade, err = strconv.ParseBool(v); err != nil {
				s.writeErr(c, badRequest("cascade", "want true or false, got %q", v))
				return
			}
		}
		k.deleteUser(c, name, want, cascade)
		return
	}
	for try := 0; ; try++ {
		rec, obj, err := k.load(p, name)
		if err != nil {
			s.writeErr(c, err)
			return
		}
		if err := s.checkNodeDown(obj, force); err != nil {
			s.writeErr(c, err)
			return
		}
		// Delete exactly the object that is returned (and, for a user, checked to
		// be theirs).
		cond := want
		if cond.IsZero() {
			cond = rec.Version
		}
		_, err = s.st.Delete(k.kind, name, cond)
		if errors.Is(err, store.ErrConflict) && want.IsZero() && try < writeTries {
			continue
		}
		if err != nil {
			s.writeErr(c, err)
			return
		}
		s.writeRecord(c, http.StatusOK, rec)
		return
	}
}

// deleteUser deletes user name (at version want, when set) unless it still
// holds claims or sessions, and then its tokens. One node decides every
// user delete (users.go): it may take an admin away. With cascade the
// user's sessions and claims are deleted first, once the deciding node has
// found it would delete the user: a delete it refuses (the last admin; no
// majority) leaves them all.
func (k kindRoutes) deleteUser(c *gin.Context, name string, want types.Version, cascade bool) {
	s := k.s
	if types.ValidateName("name", name) != nil {
		s.writeErr(c, notFound(k.kind, name))
		return
	}
	if cascade {
		if _, err := s.changeUser(c.Request.Context(), userChange{Name: name, Delete: true, Check: true, Version: want}); err != nil {
			s.writeErr(c, err)
			return
		}
		if err := s.deleteUserObjects(name); err != nil {
			s.writeErr(c, err)
			return
		}
		// Not checkUserUnused: it counts from the node's indexes, which
		// may not have heard of these deletes yet. A claim the user makes
		// elsewhere in this instant goes by the cluster's user duty
		// (cluster.duties.reconcileUser).
	} else if err := s.checkUserUnused(name); err != nil {
		s.writeErr(c, err)
		return
	}
	rec, err := s.changeUser(c.Request.Context(), userChange{Name: name, Delete: true, Version: want})
	if err != nil {
		s.writeErr(c, err)
		return
	}
	s.deleteUserTokens(name)
	s.writeRecord(c, http.StatusOK, rec)
}
