package openapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// UsersKey is the key whose owner decides, for the whole cluster, the
// changes of users that may take an admin away (Config.AtOwner): every
// node registers DecideUserChange for it.
const UsersKey = "users"

// A change that may leave the cluster without an enabled admin (a delete
// of a user, an update after which the user is no enabled admin) is
// checked against the other admins and written in one step, and one node
// does that step for the whole cluster, one change at a time: the owner
// of UsersKey. Each node checking its own copy let two deletes of the last
// two admins, sent to two nodes at once, both pass (each node still saw
// the other admin). The owner decides on its own store, where every such
// change it made before is already written; the others hear of it by
// replication, and the node that asked applies it at once. Every user
// delete goes there, and every such update, whatever this node's copy
// says the user is: that copy may be late (a user made admin elsewhere a
// moment ago). A change that keeps the user an enabled admin takes none
// away and is written where it is made.

// userChange asks the owner to delete or update a user.
type userChange struct {
	Name   string `json:"name"`
	Delete bool   `json:"delete,omitempty"`
	// Check: decide whether the delete would be carried out, and write
	// nothing (a cascade asks before it deletes the user's claims).
	Check bool `json:"check,omitempty"`
	// Version is the client's condition (If-Match, metadata.version);
	// zero: none.
	Version types.Version `json:"version,omitzero"`
	// Body is an update's request body, as the client sent it.
	Body json.RawMessage `json:"body,omitempty"`
	// Records are the asking node's copies of the user and of every user
	// with role admin: the owner merges them into its store first (newer
	// facets win), so that it decides on no less than the asker saw.
	Records []store.Record `json:"records,omitempty"`
}

// userChangeAnswer is the owner's answer: the user as the client is shown
// it and what was written, or the error.
type userChangeAnswer struct {
	// Shown is the answer's object: the user as it was before a delete,
	// as an update wrote it.
	Shown *store.Record `json:"shown,omitempty"`
	// Written is the owner's write (a delete's tombstone), which the
	// asking node applies, so that a client reading through it sees its
	// change at once.
	Written *store.Record `json:"written,omitempty"`
	Status  int           `json:"status,omitempty"`
	Error   *Error        `json:"error,omitempty"`
}

// ownerPrincipal is who the owner carries a change out as: only admins
// write users (adminKind), and the node that asked checked the caller.
var ownerPrincipal = Principal{Name: "owner of " + UsersKey, User: AdminUser, Role: RoleAdmin}

// enabledAdmin reports whether u holds role admin and is not disabled.
func enabledAdmin(u *types.User) bool { return u.HasRole(RoleAdmin) && !u.Spec.Disabled }

// changeUser has ch carried out by the node that decides for the cluster
// (Config.AtOwner), or here when there is none (a server on its own), and
// returns the user as the client is shown it. The owner out of reach, or
// not deciding yet, is a 503 to retry.
func (s *Server) changeUser(ctx context.Context, ch userChange) (store.Record, error) {
	if s.cfg.AtOwner == nil {
		shown, _, err := s.decideUserChange(ch)
		return shown, err
	}
	recs, err := s.adminRecords(ch.Name)
	if err != nil {
		return store.Record{}, err
	}
	ch.Records = recs
	body, err := json.Marshal(ch)
	if err != nil {
		return store.Record{}, fmt.Errorf("encode user change: %w", err)
	}
	out, err := s.cfg.AtOwner(ctx, UsersKey, body)
	if err != nil {
		what := "the update"
		if ch.Delete {
			what = "the delete"
		}
		return store.Record{}, newErr(http.StatusServiceUnavailable, CodeUnavailable, "",
			"%s of user %s is decided by one node for the whole cluster (as every user delete, and every change that may take an admin away, is): %v", what, ch.Name, err).retryAfter(1)
	}
	var ans userChangeAnswer
	if err := json.Unmarshal(out, &ans); err != nil {
		return store.Record{}, fmt.Errorf("decode the answer to a user change: %w", err)
	}
	if ans.Error != nil {
		return store.Record{}, &apiError{status: ans.Status, body: *ans.Error}
	}
	if ans.Shown == nil {
		return store.Record{}, errors.New("the answer to a user change shows no user")
	}
	if ans.Written != nil {
		if _, err := s.st.Apply(*ans.Written); err != nil {
			// Replication brings it anyway.
			s.log.Warn("apply the owner's user change", "user", ch.Name, "err", err)
		}
	}
	return *ans.Shown, nil
}

// adminRecords are this node's copies of user name and of every user with
// role admin, for the owner to merge.
func (s *Server) adminRecords(name string) ([]store.Record, error) {
	var out []store.Record
	err := s.st.Each(types.KindUser, func(rec store.Record) error {
		if rec.Name == name {
			out = append(out, rec)
			return nil
		}
		obj, err := store.Decode(rec)
		if err != nil {
			return nil // not this check's to judge
		}
		if u, ok := obj.(*types.User); ok && u.HasRole(RoleAdmin) {
			out = append(out, rec)
		}
		return nil
	})
	return out, err
}

// DecideUserChange carries out a user change another node asked for (or
// this one, when it owns UsersKey): the handler of UsersKey's asks. It
// answers with the user as the client is shown it, or the error.
func (s *Server) DecideUserChange(_ context.Context, body []byte) []byte {
	var ans userChangeAnswer
	var ch userChange
	err := json.Unmarshal(body, &ch)
	if err == nil {
		for _, r := range ch.Records {
			if r.Kind != types.KindUser {
				continue
			}
			if _, aerr := s.st.Apply(r); aerr != nil {
				s.log.Warn("apply the asker's copy of a user", "user", r.Name, "err", aerr)
			}
		}
		var shown, written store.Record
		if shown, written, err = s.decideUserChange(ch); err == nil {
			ans.Shown, ans.Written = &shown, &written
		}
	} else {
		err = fmt.Errorf("decode user change: %w", err)
	}
	if err != nil {
		ae := toAPIError(err)
		if ae.status >= http.StatusInternalServerError {
			s.log.Error("user change failed", "user", ch.Name, "err", err)
		}
		ans.Status, ans.Error = ae.status, &ae.body
	}
	out, err := json.Marshal(ans)
	if err != nil {
		s.log.Error("encode the answer to a user change", "user", ch.Name, "err", err)
		out, _ = json.Marshal(userChangeAnswer{Status: http.StatusInternalServerError, Error: &Error{Code: CodeInternal, Message: "internal error"}})
	}
	return out
}

// decideUserChange checks ch against the other admins and writes it, one
// change at a time: it returns the user as shown and what was written.
func (s *Server) decideUserChange(ch userChange) (shown, written store.Record, err error) {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	k := kindRoutes{s: s, kind: types.KindUser}
	if !ch.Delete {
		written, _, err = k.put(ownerPrincipal, ch.Name, nil, ch.Body, ch.Version, "")
		return written, written, err
	}
	for try := 0; ; try++ {
		rec, _, err := k.load(ownerPrincipal, ch.Name)
		if err != nil {
			return store.Record{}, store.Record{}, err
		}
		if err := s.checkAdminLeft(ch.Name); err != nil {
			return store.Record{}, store.Record{}, err
		}
		if ch.Check {
			return rec, rec, nil
		}
		// Delete exactly the user that is returned (and checked).
		cond := ch.Version
		if cond.IsZero() {
			cond = rec.Version
		}
		written, err = s.st.Delete(types.KindUser, ch.Name, cond)
		if errors.Is(err, store.ErrConflict) && ch.Version.IsZero() && try < writeTries {
			continue
		}
		return rec, written, err
	}
}

// checkAdminLeft refuses to delete the last enabled user holding the
// admin role (409): nobody could manage users and tokens any more, and
// every admin token, the nodes' local ones included, would stop. It counts
// what this node's store holds: run it where the change is decided
// (decideUserChange).
func (s *Server) checkAdminLeft(user string) error {
	users, err := store.List[types.User](s.st, types.KindUser)
	if err != nil {
		return err
	}
	admin, others := false, 0
	for _, u := range users {
		switch {
		case !u.HasRole(RoleAdmin):
		case u.Metadata.Name == user:
			admin = true
		case !u.Spec.Disabled:
			others++
		}
	}
	if !admin {
		return nil
	}
	if others > 0 {
		if s.adminLeft != nil {
			s.adminLeft(user)
		}
		return nil
	}
	return newErr(http.StatusConflict, CodeConflict, "", "user %s is the last enabled user with role admin: without it nobody could manage users and tokens, and every admin token (the nodes' local-* ones too) would stop working; give another user role admin first", user)
}

// checkAdminKept refuses an update of a user that takes role admin from,
// or disables, the last enabled user holding it (409), as checkAdminLeft
// refuses its delete: an admin demoting itself locked everybody out.
func (s *Server) checkAdminKept(obj, stored types.Object) error {
	u, ok := obj.(*types.User)
	if !ok {
		return nil
	}
	was := stored.(*types.User)
	if !was.HasRole(RoleAdmin) || was.Spec.Disabled || enabledAdmin(u) {
		return nil
	}
	field := "spec.roles"
	if u.HasRole(RoleAdmin) {
		field = "spec.disabled"
	}
	err := s.checkAdminLeft(u.Metadata.Name)
	var ae *apiError
	if errors.As(err, &ae) {
		ae.body.Field = field
	}
	return err
}
