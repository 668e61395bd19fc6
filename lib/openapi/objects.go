package openapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"k8s.io/apimachinery/pkg/labels"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Pure rules of what the API writes into an object besides what the client sent.

// clientWritesStatus reports whether the API takes status from the client. Most
// statuses have an owner in the cluster (a node, an elector, a reconciler) and
// the API never writes them; hf keeps no status of an Environment, so the
// conditions a provider or an admin writes there are kept.
func clientWritesStatus(kind string) bool { return kind == types.KindEnvironment }

// resetStatus clears o's status.
func resetStatus(o types.Object) {
	switch v := o.(type) {
	case *types.Node:
		v.Status = types.NodeStatus{}
	case *types.MachineSet:
		v.Status = types.MachineSetStatus{}
	case *types.Machine:
		v.Status = types.MachineStatus{}
	case *types.MachineClaim:
		v.Status = types.MachineClaimStatus{}
	case *types.ScheduledEvent:
		v.Status = types.ScheduledEventStatus{}
	case *types.AccessCode:
		v.Status = types.AccessCodeStatus{}
	case *types.Session:
		v.Status = types.SessionStatus{}
	}
}

// copyStatus sets dst's status to src's (same kind).
func copyStatus(dst, src types.Object) {
	switch d := dst.(type) {
	case *types.Node:
		d.Status = src.(*types.Node).Status
	case *types.MachineSet:
		d.Status = src.(*types.MachineSet).Status
	case *types.Machine:
		d.Status = src.(*types.Machine).Status
	case *types.MachineClaim:
		d.Status = src.(*types.MachineClaim).Status
	case *types.ScheduledEvent:
		d.Status = src.(*types.ScheduledEvent).Status
	case *types.AccessCode:
		d.Status = src.(*types.AccessCode).Status
	case *types.Session:
		d.Status = src.(*types.Session).Status
	}
}

// validateClientStatus checks the status fields a client may write, which
// types.Validate does not cover.
func validateClientStatus(o types.Object) error {
	if e, ok := o.(*types.Environment); ok {
		return types.ValidateConditions("status.conditions", e.Status.Conditions)
	}
	return nil
}

// apiFacets are the facets of kind that the API writes on an update: the
// spec (with labels and annotations; an AccessCode's status is part of it),
// or a Node's maintenance flag. The other facets have owners in the cluster.
func apiFacets(kind string) []string {
	if kind == types.KindNode {
		return []string{types.FacetMaintenance}
	}
	return []string{types.FacetSpec}
}

// prepareCreate sets what the server owns on a new object: no version or times
// from the client, and the status reset (a claim is Requested from its
// creation on: its status is derived from its facets).
func prepareCreate(o types.Object) {
	m := o.Meta()
	m.Version, m.Facets = types.Version{}, nil
	m.CreatedAt = time.Time{}
	m.UpdatedAt = time.Time{}
	if !clientWritesStatus(o.GetKind()) {
		resetStatus(o)
	}
}

// prepareUpdate carries over what a PUT does not change: createdAt and, unless
// the client writes it, the status (keepFixed holds it to the fields it may
// not change).
func prepareUpdate(o, stored types.Object) {
	m := o.Meta()
	m.Version, m.Facets = types.Version{}, nil
	m.UpdatedAt = time.Time{}
	m.CreatedAt = stored.Meta().CreatedAt
	if !clientWritesStatus(o.GetKind()) {
		copyStatus(o, stored)
	}
}

// parseSelector parses a labelSelector in Kubernetes' syntax (=, ==, !=,
// in, notin, key, !key; comma-separated, all must hold) with
// Kubernetes' own parser; anything it cannot parse is a 400 naming
// labelSelector. Empty selects everything.
func parseSelector(s string) (labels.Selector, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, badRequest("labelSelector", "%v", err)
	}
	return sel, nil
}

// parseIfMatch reads an If-Match header: a version, optionally quoted (an
// entity tag) or weak; "*" and "" mean no condition.
func parseIfMatch(h string) (types.Version, error) {
	h = strings.TrimSpace(h)
	h = strings.TrimPrefix(h, "W/")
	h = strings.Trim(h, `"`)
	if h == "*" {
		return types.Version{}, nil
	}
	v, err := types.ParseVersion(h)
	if err != nil {
		return types.Version{}, badRequest("If-Match", "want a version hlc@node: %v", err)
	}
	return v, nil
}

// precondition combines If-Match and metadata.version; when both are given they
// must agree.
func precondition(header string, body types.Version) (types.Version, error) {
	hv, err := parseIfMatch(header)
	if err != nil {
		return types.Version{}, err
	}
	switch {
	case hv.IsZero():
		return body, nil
	case body.IsZero() || body == hv:
		return hv, nil
	}
	return types.Version{}, badRequest("metadata.version", "is %s but If-Match says %s", body, hv)
}

// errCodeRefused is what a user is told of an access code refused for any
// reason.
const errCodeRefused = "no active access code with this secret grants what this asks for (its machine sets and scheduled event); ask whoever gave you the code"

// checkGrant gates claims and sessions by access code. spec.accessCode is
// the code's secret (never its object name): it must match an active code
// that grants the sets and the event the object names
// (scheduler.CheckAccessCode); the object then carries the code's name in
// the hf/access-code label, which sets reserved for the code look for. A
// user's claim or session under a scheduled event must present a code
// granting the event. Refusals are 403; to a user they all read the same
// (errCodeRefused) and count as a guess that missed, so they never tell
// whether some code has the secret but is inactive or grants something
// else. Staff, who can list the codes, are told which check failed.
func (s *Server) checkGrant(p Principal, o types.Object) error {
	var claim types.MachineClaim
	switch v := o.(type) {
	case *types.MachineClaim:
		claim = *v
	case *types.Session:
		claim.Spec.AccessCode, claim.Spec.ScheduledEvent = v.Spec.AccessCode, v.Spec.ScheduledEvent
	default:
		return nil
	}
	if claim.Spec.AccessCode == "" {
		if ev := claim.Spec.ScheduledEvent; ev != "" && !p.Staff() {
			return forbidden("spec.accessCode", "scheduled event %s is open to holders of an access code granting it", ev)
		}
		return nil
	}
	now := s.cfg.Now()
	if !p.Staff() {
		if d := s.guesses.wait(p.User, now); d > 0 {
			return tooMany("spec.accessCode", d, fmt.Sprintf("user %s presented too many access codes that match none", p.User))
		}
	}
	code, err := s.codeBySecret(claim.Spec.AccessCode)
	if err != nil {
		return err
	}
	if err := scheduler.CheckAccessCode(now, code, claim); err != nil {
		var fe *types.FieldError
		switch {
		case !errors.As(err, &fe):
			return err
		case p.Staff():
			return forbidden(fe.Field, "%s", fe.Message)
		}
		// To a user every refusal reads the same and counts as a miss: a
		// code that exists but is off, or grants something else, must not
		// tell a guesser that the secret is one.
		s.guesses.take(p.User, now)
		return forbidden("spec.accessCode", "%s", errCodeRefused)
	}
	m := o.Meta()
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[types.LabelAccessCode] = code.Metadata.Name
	return nil
}

// quotaApplies says whether creating o counts against p's claim quota: a
// claim, or a session (which makes one) of a user of role user.
func (s *Server) quotaApplies(p Principal, o types.Object) bool {
	k := o.GetKind()
	return !p.Staff() && s.cfg.MaxClaimsPerUser > 0 && (k == types.KindMachineClaim || k == types.KindSession)
}

// lockUserQuota holds the quota lock of p's user while one of its claims
// or sessions is counted and written, when a cap applies; it returns the
// unlock.
func (s *Server) lockUserQuota(p Principal, o types.Object) func() {
	if !s.quotaApplies(p, o) {
		return func() {}
	}
	mu, _ := s.quotaLocks.LoadOrStore(p.User, &sync.Mutex{})
	m := mu.(*sync.Mutex)
	m.Lock()
	return m.Unlock
}

// checkClaimQuota refuses a user's claim past MaxClaimsPerUser live
// (Requested or Bound) claims of theirs (429). A session makes a claim for
// its user, so one that has not made it yet counts as a claim, and a user
// holds at most as many sessions not yet ended. Creates through one node
// are counted one at a time (lockUserQuota); creates sent to several nodes
// at once may pass it by a few.
func (s *Server) checkClaimQuota(p Principal, o types.Object) error {
	if !s.quotaApplies(p, o) {
		return nil
	}
	limit := s.cfg.MaxClaimsPerUser
	live, err := s.liveClaims(p.User)
	if err != nil {
		return err
	}
	open, waiting, err := s.userSessions(p.User)
	if err != nil {
		return err
	}
	if o.GetKind() == types.KindSession && open >= limit {
		return newErr(http.StatusTooManyRequests, CodeTooMany, "", "user %s holds %d sessions not yet ended, the most a user may (api.max_claims_per_user); end one first", p.User, open)
	}
	if live+waiting >= limit {
		return newErr(http.StatusTooManyRequests, CodeTooMany, "", "user %s holds %d live claims, the most a user may (api.max_claims_per_user); end one first", p.User, live+waiting)
	}
	return nil
}

// userSessions counts user's sessions not yet ended, and of those the ones
// that have not made their claim yet: from the node's index when it has
// one (a user's write does not read every session of the cluster), else
// from the store.
func (s *Server) userSessions(user string) (open, waiting int, err error) {
	all, err := s.sessionsOf(user)
	if err != nil {
		return 0, 0, err
	}
	for _, se := range all {
		if se.Status.Phase == types.SessionPhaseEnded {
			continue
		}
		open++
		if se.Status.MachineClaim == "" && se.Spec.MachineTemplate != "" { // (one without a template makes none)
			waiting++
		}
	}
	return open, waiting, nil
}

// deleteUserObjects deletes user's sessions and claims (whatever their
// phase: their machines are released), for a user delete with cascade,
// which the user's owner has found it would carry out.
func (s *Server) deleteUserObjects(user string) error {
	sessions, err := s.sessionsOf(user)
	if err != nil {
		return err
	}
	claims, err := s.userClaims(user)
	if err != nil {
		return err
	}
	var refs [][2]string
	for _, se := range sessions {
		refs = append(refs, [2]string{types.KindSession, se.Metadata.Name})
	}
	for _, c := range claims {
		refs = append(refs, [2]string{types.KindMachineClaim, c.Metadata.Name})
	}
	for _, r := range refs {
		if _, err := s.st.Delete(r[0], r[1], types.Version{}); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("delete %s %s of user %s: %w", r[0], r[1], user, err)
		}
	}
	return nil
}

// liveClaims counts user's Requested or Bound claims: from the node's
// indexes when it has them (a user's ended claims are not read, nor is a
// packed claim decoded, for each create), else from their claims.
func (s *Server) liveClaims(user string) (int, error) {
	if s.cfg.LiveClaimsOf != nil {
		ctx, cancel := context.WithTimeout(context.Background(), claimsOfWait)
		defer cancel()
		if n, err := s.cfg.LiveClaimsOf(ctx, user); err == nil {
			return n, nil
		}
	}
	claims, err := s.userClaims(user)
	if err != nil {
		return 0, err
	}
	live := 0
	for _, c := range claims {
		if c.Status.Phase == types.ClaimRequested || c.Status.Phase == types.ClaimBound {
			live++
		}
	}
	return live, nil
}

// checkUserUnused refuses to delete a user who still holds live claims or
// sessions not ended: their machines would run on for nobody (a cloud VM
// at a cost), and nothing would release them. The user's tokens go with
// the user (deleteUserTokens), so they do not hold it up.
func (s *Server) checkUserUnused(user string) error {
	claims, err := s.liveClaims(user)
	if err != nil {
		return err
	}
	sessions, _, err := s.userSessions(user)
	if err != nil {
		return err
	}
	if claims+sessions == 0 {
		return nil
	}
	return newErr(http.StatusConflict, CodeConflict, "", "user %s still holds %d live claims and %d sessions: delete them first (hf-cli user delete --cascade does, and deletes the user's tokens too)",
		user, claims, sessions)
}

// deleteUserTokens deletes the tokens of user, just deleted. They stopped
// working with it already (and a user made again under the name does not
// take them back: types.Token.OfUser); this keeps them out of the token
// list. A token that cannot be deleted is logged and left: it is dead.
func (s *Server) deleteUserTokens(user string) {
	toks, err := store.List[types.Token](s.st, types.KindToken)
	if err != nil {
		s.log.Warn("list tokens of deleted user", "user", user, "err", err)
		return
	}
	for _, t := range toks {
		if t.Spec.User != user {
			continue
		}
		// At its version: a token made meanwhile under the name is another's.
		if _, err := s.st.Delete(types.KindToken, t.Metadata.Name, t.Metadata.Version); err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
			s.log.Warn("delete token of deleted user", "user", user, "token", t.Metadata.Name, "err", err)
		}
	}
}

// codeBySecret returns the AccessCode whose spec.code is secret (compared
// in constant time), or nil.
func (s *Server) codeBySecret(secret string) (*types.AccessCode, error) {
	codes, err := store.List[types.AccessCode](s.st, types.KindAccessCode)
	if err != nil {
		return nil, err
	}
	var found *types.AccessCode
	for _, c := range codes {
		if subtle.ConstantTimeCompare([]byte(c.Spec.Code), []byte(secret)) == 1 {
			found = c
		}
	}
	return found, nil
}

// checkCodeUnique refuses an AccessCode whose secret another code has: a
// secret must name one code.
func (s *Server) checkCodeUnique(o types.Object) error {
	a, ok := o.(*types.AccessCode)
	if !ok {
		return nil
	}
	other, err := s.codeBySecret(a.Spec.Code)
	if err != nil {
		return err
	}
	if other != nil && other.Metadata.Name != a.Metadata.Name {
		return newErr(http.StatusConflict, CodeConflict, "spec.code", "is the secret of access code %s; each code needs its own", other.Metadata.Name)
	}
	return nil
}

// checkEventWindow refuses a new claim under a scheduled event outside the
// event's window (before its start, from its end on), for every role, and
// fills in how the claim binds from the event's line for its template. A
// session is refused only once its event is over: before the start it
// waits for it (its Claimed condition says until when), as it waits for an
// event that does not exist yet (scheduler.SessionUnderEvent).
func (s *Server) checkEventWindow(o types.Object) error {
	var event string
	switch v := o.(type) {
	case *types.MachineClaim:
		event = v.Spec.ScheduledEvent
	case *types.Session:
		event = v.Spec.ScheduledEvent
	}
	if event == "" {
		return nil
	}
	_, session := o.(*types.Session)
	rec, err := s.st.Get(types.KindScheduledEvent, event)
	if errors.Is(err, store.ErrNotFound) {
		if session {
			return nil
		}
		return badRequest("spec.scheduledEvent", "scheduled event %q does not exist", event)
	}
	if err != nil {
		return err
	}
	obj, err := store.Decode(rec)
	if err != nil {
		return err
	}
	ev := obj.(*types.ScheduledEvent)
	if session {
		if gate := scheduler.SessionUnderEvent(s.cfg.Now(), *ev, false); gate.Over {
			return forbidden("spec.scheduledEvent", "%s", gate.Message)
		}
		return nil
	}
	claim := o.(*types.MachineClaim)
	if ok, why := scheduler.ClaimAllowedByEvent(s.cfg.Now(), *ev); !ok {
		return forbidden("spec.scheduledEvent", "%s", why)
	}
	// A claim that says nothing of where it binds binds per its event's
	// requiredMachines line (the sets the event creates for the line auto-
	// preferred or auto-required).
	if under, ok := scheduler.ClaimUnderEvent(*claim, *ev); ok {
		claim.Spec = under.Spec
	}
	return nil
}

// checkClaimMetadata refuses a claim whose metadata its template does not
// accept (types.MachineTemplate.CheckClaimMetadata), for every role: metadata
// reaches the machine, so the template's word is the only one that counts.
func (s *Server) checkClaimMetadata(o types.Object) error {
	claim, ok := o.(*types.MachineClaim)
	if !ok || len(claim.Spec.Metadata) == 0 {
		return nil
	}
	tmpl, err := store.Get[types.MachineTemplate](s.st, types.KindMachineTemplate, claim.Spec.MachineTemplate)
	if errors.Is(err, store.ErrNotFound) {
		return badRequest("spec.machineTemplate", "machine template %q does not exist (claim metadata is checked against it)", claim.Spec.MachineTemplate)
	}
	if err != nil {
		return err
	}
	return tmpl.CheckClaimMetadata(claim.Spec.Metadata)
}

// checkEventCapacity refuses a new scheduled event whose required machines do
// not fit the cluster's usable capacity during its window, counting the other
// events that overlap (scheduler.EventFits). With capacityCheck=warn the event
// is accepted and the reason returned as a warning; capacityCheck=off skips it.
func (s *Server) checkEventCapacity(o types.Object, mode string) (string, error) {
	ev, ok := o.(*types.ScheduledEvent)
	if !ok {
		return "", nil
	}
	if err := checkCapacityMode(mode); err != nil || mode == "off" {
		return "", err
	}
	nodes, err := store.List[types.Node](s.st, types.KindNode)
	if err != nil {
		return "", err
	}
	var capacity types.Resources
	for _, n := range nodes {
		if n.Status.Phase == types.NodeDown {
			continue
		}
		for _, d := range n.Spec.Drivers {
			if !d.Remote {
				capacity = capacity.Add(d.Capacity.Usable)
			}
		}
	}
	tmpls, err := store.List[types.MachineTemplate](s.st, types.KindMachineTemplate)
	if err != nil {
		return "", err
	}
	templates := make(map[string]types.MachineTemplate, len(tmpls))
	for _, t := range tmpls {
		t.Spec.Resources = t.Spec.Resources.AtLeast(s.cfg.MinMachine)
		templates[t.Metadata.Name] = *t
	}
	evs, err := store.List[types.ScheduledEvent](s.st, types.KindScheduledEvent)
	if err != nil {
		return "", err
	}
	others := make([]types.ScheduledEvent, 0, len(evs))
	users := map[string]int{ev.Metadata.Name: ev.Spec.ExpectedUsers}
	for _, e := range evs {
		if e.Metadata.Name != ev.Metadata.Name {
			others = append(others, *e)
			users[e.Metadata.Name] = e.Spec.ExpectedUsers
		}
	}
	if ok, why := scheduler.EventFits(*ev, others, users, templates, capacity); !ok {
		if mode == "warn" {
			return why, nil
		}
		return "", newErr(http.StatusConflict, CodeConflict, "spec.requiredMachines", "%s (to accept it anyway, send it with ?capacityCheck=warn: hf-cli create|apply -f FILE --capacity-check warn)", why)
	}
	return "", nil
}

// checkCapacityMode refuses a capacityCheck that is none of refuse, warn
// and off ("": refuse).
func checkCapacityMode(mode string) error {
	if mode != "" && mode != "warn" && mode != "refuse" && mode != "off" {
		return badRequest("capacityCheck", "want refuse, warn or off, got %q", mode)
	}
	return nil
}

// checkEventCapacityUpdate is checkEventCapacity for an update of a
// scheduled event from stored to o: one that changes what the event needs
// or when (its required machines, times or expected users) is checked as a
// create is; another (its name shown, its scenarios) is not, whatever the
// cluster holds now. An update raised an event's needs past the cluster's
// capacity unchecked, the capacity-check flag of hf-cli apply ignored.
func (s *Server) checkEventCapacityUpdate(o, stored types.Object, mode string) (string, error) {
	ev, ok := o.(*types.ScheduledEvent)
	old, wasEvent := stored.(*types.ScheduledEvent)
	if !ok || !wasEvent {
		return "", nil
	}
	if err := checkCapacityMode(mode); err != nil {
		return "", err
	}
	if !eventNeedsChanged(old.Spec, ev.Spec) {
		return "", nil
	}
	return s.checkEventCapacity(o, mode)
}

// eventNeedsChanged reports whether b differs from a in what
// scheduler.EventFits reads: the required machines, the window and the
// expected users.
func eventNeedsChanged(a, b types.ScheduledEventSpec) bool {
	return !a.StartTime.Equal(b.StartTime) || !a.EndTime.Equal(b.EndTime) ||
		!a.ProvisioningStartTime.Equal(b.ProvisioningStartTime) || a.ExpectedUsers != b.ExpectedUsers ||
		!reflect.DeepEqual(a.RequiredMachines, b.RequiredMachines)
}

// maxObjectBytes bounds an object's JSON as the store will hold it. Encoding can
// grow a body (json escapes '<' to six bytes), and the store must never be handed
// an entry it cannot write: that would be a 500 for bad input.
const maxObjectBytes = MaxBodyBytes

func tooLarge(n int) error {
	return newErr(http.StatusRequestEntityTooLarge, CodeTooLarge, "", "object is %d bytes once encoded; at most %d", n, maxObjectBytes)
}
