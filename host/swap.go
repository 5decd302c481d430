package host

// What a hot swap needs of the host (docs/rfcs/2026-12-02-hot-swap.md):
// the states an instance declared, a check that a new version's
// declarations fit the running version's, and an instance created before
// it is bound to the task's state store, so that it can be instantiated
// and opened on another goroutine while the running instance goes on.

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/eddy-stream/eddy/state"
)

// ErrIncompatibleState marks CheckStateCompat's refusals: the new version
// declares a state with another kind, or drops one without leave.
var ErrIncompatibleState = errors.New("host: incompatible state declarations")

// StateDecl is one state an instance declared with state_declare during
// eddy_open.
type StateDecl struct {
	Name string
	Kind int32 // abi.StateValue, StateList or StateMap
	TTL  time.Duration
	// Schema is the version of the encoding of the state's values the
	// guest declared (0: none declared).
	Schema uint32
}

// Declared returns a copy of the states the instance declared, in the
// order it declared them. They are known once Open returned, and do not
// change after it (state_declare is valid during eddy_open only), so the
// result may be handed to other goroutines.
func (i *Instance) Declared() []StateDecl {
	out := make([]StateDecl, len(i.keyed.decls))
	for k, d := range i.keyed.decls {
		out[k] = StateDecl{Name: d.name, Kind: d.kind, TTL: d.ttl, Schema: d.schema}
	}
	return out
}

// CheckStateCompat says whether an instance declaring next may take over
// the keyed state of one that declared running. A state declared by both
// with another kind refuses: its stored entries would be read as the
// wrong structure. A state running declared and next does not refuses too
// unless allowDropped (Flink's allowNonRestoredState): its entries would
// be lost to the job. New states, and changes of TTL or schema version,
// are allowed: a new state starts empty, a TTL applies to what is written
// from then on, and a schema change is the guest's to handle on read. The
// error is one line without the node, which the caller adds.
func CheckStateCompat(running, next []StateDecl, allowDropped bool) error {
	for _, r := range running {
		k := slices.IndexFunc(next, func(n StateDecl) bool { return n.Name == r.Name })
		if k < 0 {
			if allowDropped {
				continue
			}
			return markf([]error{ErrIncompatibleState}, "state %q of the running version is not declared by the new one: use --allow-dropped-state to drop it", r.Name)
		}
		if n := next[k]; n.Kind != r.Kind {
			return markf([]error{ErrIncompatibleState}, "the new version declares state %q as %s state; the running version declared it as %s state",
				r.Name, kindName(n.Kind), kindName(r.Kind))
		}
	}
	return nil
}

// DroppedStates returns the names of the states running declared and next
// does not: what a swap allowed to drop state leaves unread.
func DroppedStates(running, next []StateDecl) []string {
	var out []string
	for _, r := range running {
		if !slices.ContainsFunc(next, func(n StateDecl) bool { return n.Name == r.Name }) {
			out = append(out, r.Name)
		}
	}
	return out
}

// BindState hands an instance created with InstanceConfig.Keyed (and no
// State) the task's keyed state and timers; it may be called once, after
// Open and before the first Process, OnTimers or Finish, on the goroutine
// that will make those calls. Until then only eddy_open can run, which
// declares states but cannot touch them.
func (i *Instance) BindState(st state.Store) error {
	switch {
	case st == nil:
		return fmt.Errorf("%s: BindState with no store", i.who)
	case !i.keyed.keyed:
		return fmt.Errorf("%s: BindState on an instance created without InstanceConfig.Keyed", i.who)
	case i.keyed.store != nil:
		return fmt.Errorf("%s: BindState called twice", i.who)
	}
	i.keyed.store = st
	return nil
}
