package fsm

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestTokens(t *testing.T) {
	h := newHarness(t)
	h.must(&CreateTenant{ID: "acme", Quota: Quota{Slots: 4, CPUShare: 2}})
	tok := h.must(&CreateToken{Token: Token{ID: "t1", Tenant: "acme", Role: RoleDeveloper, Hash: digest("s1"), Expires: time.UnixMilli(5_000_000).UTC()}}).(Token)
	if tok.Created.IsZero() || !tok.Usable(time.UnixMilli(4_999_999)) || tok.Usable(time.UnixMilli(5_000_000)) {
		t.Fatalf("token %+v: created or expiry wrong", tok)
	}
	if _, err := h.apply(&CreateToken{Token: Token{ID: "t1", Tenant: "acme", Role: RoleViewer, Hash: digest("s2")}}); !errors.Is(err, ErrTokenExists) {
		t.Fatalf("duplicate id: %v", err)
	}
	for name, bad := range map[string]Token{
		"no tenant":  {ID: "t2", Tenant: "nope", Role: RoleViewer, Hash: digest("x")},
		"role":       {ID: "t2", Tenant: "acme", Role: "root", Hash: digest("x")},
		"short hash": {ID: "t2", Tenant: "acme", Role: RoleViewer, Hash: "abc"},
	} {
		data, err := Encode(&CreateToken{Token: bad}, time.Now())
		if err == nil {
			_, err = h.applyRaw(data)
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := h.apply(&RevokeToken{ID: "t1", Tenant: "default"}); !errors.Is(err, ErrTokenNotFound) {
		t.Fatalf("revoke through another tenant: %v", err)
	}
	rev := h.must(&RevokeToken{ID: "t1", Tenant: "acme"}).(Token)
	if rev.Revoked.IsZero() || rev.Usable(time.UnixMilli(0)) {
		t.Fatalf("revoked token usable: %+v", rev)
	}
	again := h.must(&RevokeToken{ID: "t1"}).(Token)
	if !again.Revoked.Equal(rev.Revoked) {
		t.Fatal("a second revocation moved the time")
	}
	if q := h.must(&SetQuota{Tenant: "acme", Quota: Quota{Jobs: 1}}).(Tenant).Quota; q != (Quota{Jobs: 1}) {
		t.Fatalf("set quota replaced with %+v", q)
	}
	if _, err := Encode(&SetQuota{Tenant: "acme", Quota: Quota{Slots: -1}}, time.Now()); !errors.Is(err, ErrMalformed) {
		t.Fatalf("negative quota: %v", err)
	}
	if w := (Quota{}).Weight(); w != 1 {
		t.Fatalf("default weight %d", w)
	}
}

func TestDeleteTenant(t *testing.T) {
	h := newHarness(t)
	h.must(&CreateTenant{ID: "acme"})
	h.must(&RegisterModule{Tenant: "acme", Name: "m", SHA256: digest("m"), Size: 1})
	h.must(&CreateToken{Token: Token{ID: "t1", Tenant: "acme", Role: RoleDeveloper, Hash: digest("s")}})
	j := h.must(&SubmitJob{Tenant: "acme", Name: "live", Tasks: []string{"t0"}}).(Job)
	if _, err := h.apply(&DeleteTenant{ID: "acme"}); !errors.Is(err, ErrTenantInUse) {
		t.Fatalf("delete with a live job: %v", err)
	}
	if _, err := h.apply(&DeleteTenant{ID: DefaultTenant}); !errors.Is(err, ErrTenantInUse) {
		t.Fatalf("delete default: %v", err)
	}
	h.must(&CancelJob{Tenant: "acme", JobID: j.ID})
	h.must(&DeleteTenant{ID: "acme"})
	if _, err := h.f.Tenant("acme"); !errors.Is(err, ErrTenantNotFound) {
		t.Fatal("tenant still there")
	}
	if len(h.f.Modules("acme")) != 0 || len(h.f.Tokens("acme")) != 0 || len(h.f.Jobs("acme")) != 0 {
		t.Fatal("the tenant's modules, tokens or jobs survived it")
	}
	// A tenant of the same name starts empty.
	h.must(&CreateTenant{ID: "acme"})
	if _, err := h.f.Token("t1"); !errors.Is(err, ErrTokenNotFound) {
		t.Fatal("an old token works for a new tenant of the same name")
	}
}

// TestAuditRetention: the log keeps the latest MaxAuditEntries entries,
// numbered without gaps, and survives a snapshot.
func TestAuditRetention(t *testing.T) {
	h := newHarness(t)
	total := MaxAuditEntries + 25
	for i := range total {
		h.must(&RecordAudit{Entry: AuditEntry{TokenID: "t1", Method: "SubmitJob", Target: fmt.Sprint("job/", i), Outcome: "ok"}})
	}
	all := h.f.Audit(0, 0)
	if len(all) != MaxAuditEntries || all[0].Seq != 26 || all[len(all)-1].Seq != uint64(total) {
		t.Fatalf("kept %d entries, %d..%d", len(all), all[0].Seq, all[len(all)-1].Seq)
	}
	if page := h.f.Audit(uint64(total-3), 2); len(page) != 2 || page[0].Seq != uint64(total-2) {
		t.Fatalf("page after %d: %+v", total-3, page)
	}
	data, err := h.f.MarshalState()
	if err != nil {
		t.Fatal(err)
	}
	g := New()
	if err := g.UnmarshalState(data); err != nil {
		t.Fatal(err)
	}
	again, _ := g.MarshalState()
	if string(again) != string(data) {
		t.Fatal("the audit log does not survive a snapshot")
	}
	if _, err := Encode(&RecordAudit{Entry: AuditEntry{Outcome: "ok"}}, time.Now()); !errors.Is(err, ErrMalformed) {
		t.Fatalf("entry without a method: %v", err)
	}
}
