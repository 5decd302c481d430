package host

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/abi"
)

func TestCheckStateCompat(t *testing.T) {
	count := StateDecl{Name: "count", Kind: abi.StateValue}
	for _, tc := range []struct {
		name          string
		running, next []StateDecl
		allowDropped  bool
		err           string // "" means compatible
	}{
		{name: "same", running: []StateDecl{count}, next: []StateDecl{count}},
		{name: "none before, none after"},
		{name: "new state", running: []StateDecl{count}, next: []StateDecl{count, {Name: "seen", Kind: abi.StateMap}}},
		{name: "declared in another order", running: []StateDecl{count, {Name: "l", Kind: abi.StateList}},
			next: []StateDecl{{Name: "l", Kind: abi.StateList}, count}},
		{name: "ttl changed", running: []StateDecl{count}, next: []StateDecl{{Name: "count", Kind: abi.StateValue, TTL: time.Hour}}},
		{name: "schema changed", running: []StateDecl{count}, next: []StateDecl{{Name: "count", Kind: abi.StateValue, Schema: 2}}},
		{name: "kind changed", running: []StateDecl{count}, next: []StateDecl{{Name: "count", Kind: abi.StateList}},
			err: `the new version declares state "count" as list state; the running version declared it as value state`},
		{name: "kind changed, drops allowed", running: []StateDecl{count}, next: []StateDecl{{Name: "count", Kind: abi.StateMap}}, allowDropped: true,
			err: `the new version declares state "count" as map state; the running version declared it as value state`},
		{name: "dropped", running: []StateDecl{count}, next: []StateDecl{{Name: "total", Kind: abi.StateValue}},
			err: `state "count" of the running version is not declared by the new one: use --allow-dropped-state to drop it`},
		{name: "dropped, allowed", running: []StateDecl{count}, next: []StateDecl{{Name: "total", Kind: abi.StateValue}}, allowDropped: true},
		{name: "all dropped, allowed", running: []StateDecl{count}, allowDropped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckStateCompat(tc.running, tc.next, tc.allowDropped)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.err {
				t.Fatalf("error %v\nwant %s", err, tc.err)
			}
			if !errors.Is(err, ErrIncompatibleState) {
				t.Errorf("%v does not match ErrIncompatibleState", err)
			}
		})
	}
}

func TestDroppedStates(t *testing.T) {
	running := []StateDecl{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	if got := DroppedStates(running, []StateDecl{{Name: "b"}, {Name: "d"}}); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("DroppedStates = %q", got)
	}
}

// TestPreparedInstance: an instance created with Keyed and no store opens
// (declaring its states, which Declared reports), refuses calls until
// BindState, and then counts on the store it is bound to, continuing what
// another module left there: a hot swap from counter-go to counter-c.
func TestPreparedInstance(t *testing.T) {
	e := newKeyedEngine(t)
	st := newStore(t, allGroups, nil)
	ctx := context.Background()
	v1, err := loadUDF(t, e, "counter-go").NewInstance(ctx, InstanceConfig{Name: "j/count[0]", State: st})
	if err != nil {
		t.Fatal(err)
	}
	defer v1.Close()
	if err := v1.Open(nil); err != nil {
		t.Fatal(err)
	}
	recs := []abi.Record{{Key: []byte("k"), Value: []byte(`{}`)}, {Key: []byte("k"), Value: []byte(`{}`)}}
	if err := v1.Process(recs, nil); err != nil {
		t.Fatal(err)
	}

	v2, err := loadUDF(t, e, "counter-c").NewInstance(ctx, InstanceConfig{Name: "j/count[0]", Keyed: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	if err := v2.Open(nil); err != nil {
		t.Fatal(err)
	}
	want := []StateDecl{{Name: "count", Kind: abi.StateValue}}
	if got := v2.Declared(); !slices.Equal(got, want) || !slices.Equal(v1.Declared(), want) {
		t.Fatalf("Declared = %+v and %+v, want %+v", v1.Declared(), got, want)
	}
	if err := CheckStateCompat(v1.Declared(), v2.Declared(), false); err != nil {
		t.Fatal(err)
	}
	if err := v2.Process(recs, nil); err == nil || !strings.Contains(err.Error(), "eddy_process before BindState") {
		t.Fatalf("Process before BindState: %v", err)
	}
	if err := v2.BindState(st); err != nil {
		t.Fatal(err)
	}
	if err := v2.BindState(st); err == nil {
		t.Error("BindState twice succeeded")
	}
	var c collector
	if err := v2.Process(recs[:1], c.emit); err != nil {
		t.Fatal(err)
	}
	if len(c.recs) != 1 || string(c.recs[0].Value) != `{"key":"k","count":3}` {
		t.Fatalf("v2 emitted %d records (%+v), want count 3", len(c.recs), c.recs)
	}
}

// TestBindStateRefused: BindState is for instances created with Keyed.
func TestBindStateRefused(t *testing.T) {
	e := newKeyedEngine(t)
	st := newStore(t, allGroups, nil)
	inst, err := loadUDF(t, e, "counter-c").NewInstance(context.Background(), InstanceConfig{Name: "j/count[0]"})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	// Not keyed: eddy_open's state_declare traps, as before.
	if err := inst.Open(nil); err == nil || !strings.Contains(err.Error(), "keyed state needs key_by on node count") {
		t.Fatalf("Open of a keyed module on a node that is not keyed: %v", err)
	}
	if err := inst.BindState(st); err == nil || !strings.Contains(err.Error(), "without InstanceConfig.Keyed") {
		t.Fatalf("BindState: %v", err)
	}
}
