package auth

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

func TestNewParseRoundTrip(t *testing.T) {
	wire, tok, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(wire) != Len || !strings.HasPrefix(wire, "eddy_") {
		t.Fatalf("token %q: want eddy_ and %d characters", wire, Len)
	}
	got, err := Parse(wire)
	if err != nil || got != tok || !got.Matches(tok.Hash()) {
		t.Fatalf("parse %q: %v, %v", wire, got.ID, err)
	}
	other, _, _ := New(nil)
	o, _ := Parse(other)
	if o.ID == tok.ID || o.Matches(tok.Hash()) {
		t.Fatal("two new tokens collide")
	}
	if h, err := FromHeader("bearer " + wire); err != nil || h != tok {
		t.Fatalf("header: %v", err)
	}
}

func TestParseRefuses(t *testing.T) {
	wire, _, _ := New(bytes.NewReader(bytes.Repeat([]byte{0xab}, 40)))
	for name, s := range map[string]string{
		"empty":        "",
		"short":        wire[:Len-1],
		"long":         wire + "0",
		"prefix":       "eddx" + wire[4:],
		"separator":    wire[:len(prefix)+idLen] + "-" + wire[len(prefix)+idLen+1:],
		"upper hex":    strings.ToUpper(wire[:5]) + strings.ToUpper(wire[5:]),
		"not hex":      wire[:Len-1] + "g",
		"basic scheme": "",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(s)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(%q) = %v, want ErrMalformed", s, err)
			}
			if s != "" && strings.Contains(err.Error(), s) {
				t.Fatalf("the error quotes the token: %v", err)
			}
		})
	}
	if _, err := FromHeader("Basic " + wire); !errors.Is(err, ErrMalformed) || strings.Contains(err.Error(), wire) {
		t.Fatalf("basic scheme: %v", err)
	}
	if _, err := FromHeader(wire); !errors.Is(err, ErrMalformed) {
		t.Fatalf("no scheme: %v", err)
	}
}

// TestEveryMethodHasAccess: a Control method added without a role is
// refused to all (For's default), and this test says which one to add.
func TestEveryMethodHasAccess(t *testing.T) {
	for _, m := range eddyv1.Control_ServiceDesc.Methods {
		if _, ok := Methods[m.MethodName]; !ok {
			t.Errorf("Control.%s has no entry in auth.Methods", m.MethodName)
		}
	}
	if _, a := For("/eddy.v1.Control/NoSuchMethod"); a.Role.Valid() || fsm.RoleAdmin.AtLeast(a.Role) {
		t.Fatalf("an unknown method is open: %+v", a)
	}
	if short, a := For(eddyv1.Control_SubmitJob_FullMethodName); short != "SubmitJob" || a.Role != fsm.RoleDeveloper || !a.Mutates {
		t.Fatalf("SubmitJob: %s %+v", short, a)
	}
}

func FuzzFromHeader(f *testing.F) {
	wire, _, _ := New(nil)
	f.Add("Bearer " + wire)
	f.Add("bearer  " + wire + " ")
	f.Add("Basic abc")
	f.Add("Bearer eddy_" + strings.Repeat("0", 16) + "_" + strings.Repeat("f", 64))
	f.Fuzz(func(t *testing.T, v string) {
		tok, err := FromHeader(v)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not ErrMalformed: %v", err)
			}
			if len(v) > 20 && strings.Contains(err.Error(), strings.TrimSpace(v)) {
				t.Fatalf("error quotes the header: %v", err)
			}
			return
		}
		if len(tok.ID) != idLen || len(tok.Hash()) != 64 {
			t.Fatalf("accepted %q as id %q", v, tok.ID)
		}
		again, err := Parse("eddy_" + tok.ID + "_" + tok.secret)
		if err != nil || again != tok {
			t.Fatalf("accepted token does not round-trip: %v", err)
		}
	})
}
