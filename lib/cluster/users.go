package cluster

import (
	"time"

	"github.com/hf-fleet/hf/lib/cluster/cache"
	"github.com/hf-fleet/hf/lib/types"
)

// userGoneGrace bounds which objects of a deleted user the user duty
// deletes: those created before the delete was written, or within this of
// it (another node's clock; a claim made the instant the user went). A user
// made again under the name owns what comes later, even where its new
// record arrives after its first claim.
const userGoneGrace = time.Minute

// reconcileUser deletes the live claims and the sessions not ended of a
// deleted user. The API refuses a user delete while the user holds live
// claims or sessions, and a cascade deletes them first; but a claim or
// session the user made on another node in that instant (its token still
// good there) reaches the decision after it, and would keep its machine for
// nobody. A user with no record at all (a name an admin's claim gives) is
// left alone; so is one that exists.
func (d *duties) reconcileUser(name string) time.Duration {
	n := d.n
	if _, ok := n.cache.Get(types.KindUser, name); ok {
		return 0
	}
	rec, ok, err := n.st.Lookup(types.KindUser, name)
	if err != nil {
		n.log.Warn("user duty: read user", "user", name, "err", err)
		return time.Second
	}
	if !ok || !rec.Deleted || rec.Tomb.IsZero() {
		return 0
	}
	madeBefore := rec.DeletedAt.Add(userGoneGrace)
	// What holds a machine or will: live claims and sessions not ended
	// (as the API's check counts); ended ones stay, as a plain delete
	// leaves them.
	for _, s := range cache.TypedIndex[types.Session](n.cache, idxSessionUser, name) {
		if s.Spec.User == name && s.Status.Phase != types.SessionPhaseEnded && s.Metadata.CreatedAt.Before(madeBefore) {
			d.deleteOfGoneUser(types.KindSession, s.Metadata.Name, name)
		}
	}
	for _, c := range cache.TypedIndex[types.MachineClaim](n.cache, idxClaimUser, name) {
		live := c.Status.Phase == types.ClaimRequested || c.Status.Phase == types.ClaimBound
		if c.Spec.User == name && live && c.Metadata.CreatedAt.Before(madeBefore) {
			d.deleteOfGoneUser(types.KindMachineClaim, c.Metadata.Name, name)
		}
	}
	return 0
}

// deleteOfGoneUser deletes kind/name of user, who is gone.
func (d *duties) deleteOfGoneUser(kind, name, user string) {
	if _, err := d.n.st.Delete(kind, name, types.Version{}); err != nil && !isNotFound(err) {
		d.n.log.Warn("user duty: delete what a deleted user held", "kind", kind, "name", name, "user", user, "err", err)
		return
	}
	d.n.log.Info("deleted what a deleted user held", "kind", kind, "name", name, "user", user)
}
