package fsm

import (
	"errors"
	"testing"
)

// TestCountQuotas: the FSM refuses a job or module version beyond its
// tenant's count quota; what does not add one (a retried submission, the
// same bytes again, another tenant) passes, and an ended job frees its
// place.
func TestCountQuotas(t *testing.T) {
	h := newHarness(t)
	h.must(&CreateTenant{ID: "acme", Quota: Quota{Jobs: 1, Modules: 1}})
	h.must(&RegisterModule{Tenant: "acme", Name: "m", SHA256: digest("1"), Size: 1})
	if _, err := h.apply(&RegisterModule{Tenant: "acme", Name: "m", SHA256: digest("1"), Size: 1}); err != nil {
		t.Fatalf("the same bytes again: %v", err)
	}
	_, err := h.apply(&RegisterModule{Tenant: "acme", Name: "m", SHA256: digest("2"), Size: 1})
	var qe *QuotaError
	if !errors.Is(err, ErrQuotaExceeded) || !errors.As(err, &qe) || *qe != (QuotaError{Tenant: "acme", Quota: "modules", Limit: 1, Used: 1}) {
		t.Fatalf("a second version: %v", err)
	}
	h.must(&RegisterModule{Tenant: DefaultTenant, Name: "m", SHA256: digest("2"), Size: 1})

	first := h.must(&SubmitJob{Numbered: true, Tenant: "acme", Name: "j", Tasks: []string{"t0"}, RequestID: "r1"}).(Job)
	if again, err := h.apply(&SubmitJob{Numbered: true, Tenant: "acme", Name: "j", Tasks: []string{"t0"}, RequestID: "r1"}); err != nil || again.(Job).ID != first.ID {
		t.Fatalf("a retried submission: %v, %v", again, err)
	}
	_, err = h.apply(&SubmitJob{Numbered: true, Tenant: "acme", Name: "j", Tasks: []string{"t0"}})
	if !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("a second job: %v", err)
	}
	h.must(&SubmitJob{Numbered: true, Tenant: DefaultTenant, Name: "j", Tasks: []string{"t0"}})
	h.must(&CancelJob{Tenant: "acme", JobID: first.ID})
	h.must(&SubmitJob{Numbered: true, Tenant: "acme", Name: "j", Tasks: []string{"t0"}})

	if u := h.f.TenantUsage("acme"); u != (Usage{Jobs: 1, Modules: 1}) {
		t.Fatalf("usage %+v", u)
	}
}
