package fsm

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Quota bounds what one tenant may use. A zero field means "no limit of
// this tenant's own": the cluster's default applies (a worker's host
// limits, its whole CPU). Quotas are enforced where the resource is spent
// (see DESIGN.md, "Tenancy"); the FSM only records them, except for the
// counts it can check itself at no cost (jobs, modules).
type Quota struct {
	// Slots is how many worker slots the tenant's jobs may hold at once.
	Slots int `json:"slots,omitempty"`
	// Jobs is how many jobs that are not terminal the tenant may have.
	Jobs int `json:"jobs,omitempty"`
	// Modules is how many module versions the tenant may register.
	Modules int `json:"modules,omitempty"`
	// ModuleBytes bounds the size of one module.
	ModuleBytes int64 `json:"module_bytes,omitempty"`
	// MemoryBytes bounds the linear memory of one instance.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// CallTimeoutMs is the deadline of one guest call (one batch).
	CallTimeoutMs int64 `json:"call_timeout_ms,omitempty"`
	// EmitBytes and EmitRecords bound what one guest call may emit.
	EmitBytes   int64 `json:"emit_bytes,omitempty"`
	EmitRecords int64 `json:"emit_records,omitempty"`
	// StateBytes bounds the keyed state of one job (all its tasks).
	StateBytes int64 `json:"state_bytes,omitempty"`
	// CheckpointBytes bounds the checkpoint and savepoint storage of all
	// the tenant's jobs.
	CheckpointBytes int64 `json:"checkpoint_bytes,omitempty"`
	// CPUShare is the tenant's weight when tasks of several tenants share
	// a worker's CPU; 0 counts as 1.
	CPUShare int `json:"cpu_share,omitempty"`
}

// Weight is CPUShare with 0 counted as 1.
func (q Quota) Weight() int { return max(q.CPUShare, 1) }

func (q Quota) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"slots", int64(q.Slots)}, {"jobs", int64(q.Jobs)}, {"modules", int64(q.Modules)},
		{"module_bytes", q.ModuleBytes}, {"memory_bytes", q.MemoryBytes}, {"call_timeout_ms", q.CallTimeoutMs},
		{"emit_bytes", q.EmitBytes}, {"emit_records", q.EmitRecords}, {"state_bytes", q.StateBytes},
		{"checkpoint_bytes", q.CheckpointBytes}, {"cpu_share", int64(q.CPUShare)},
	} {
		if f.v < 0 {
			return fmt.Errorf("quota %s %d is negative: %w", f.name, f.v, ErrMalformed)
		}
	}
	if q.CPUShare > MaxCPUShare {
		return fmt.Errorf("quota cpu_share %d is above %d: %w", q.CPUShare, MaxCPUShare, ErrMalformed)
	}
	return nil
}

// MaxCPUShare bounds a tenant's CPU weight, so that weights stay small
// numbers a scheduler can sum without care.
const MaxCPUShare = 10000

// Role is what a token may do.
type Role string

// Roles, from the most to the least privileged.
const (
	// RoleAdmin runs the cluster: tenants, quotas, membership, tokens, and
	// everything of every tenant.
	RoleAdmin Role = "admin"
	// RoleDeveloper manages its tenant's modules, jobs, savepoints and
	// swaps (and its tenant's tokens of roles up to its own).
	RoleDeveloper Role = "developer"
	// RoleViewer reads its tenant.
	RoleViewer Role = "viewer"
)

// Valid reports whether r is one of the roles.
func (r Role) Valid() bool { return r == RoleAdmin || r == RoleDeveloper || r == RoleViewer }

// rank orders roles: a higher rank may do everything a lower one may.
func (r Role) rank() int {
	switch r {
	case RoleAdmin:
		return 3
	case RoleDeveloper:
		return 2
	case RoleViewer:
		return 1
	}
	return 0
}

// AtLeast reports whether r may do what min may; nothing is at least an
// invalid role.
func (r Role) AtLeast(min Role) bool { return r.Valid() && min.Valid() && r.rank() >= min.rank() }

// Token is an API token as the FSM knows it: its secret is never stored,
// only the SHA-256 of it (the secret is 256 random bits, so a plain hash
// is as good as a slow one; see RATIONALE.md).
type Token struct {
	// ID is public: it names the token in lists, logs and the audit log.
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	Role   Role   `json:"role"`
	// Hash is the lower-case hex SHA-256 of the token's secret.
	Hash string `json:"hash"`
	// Description is a free label ("ci", "alice's laptop").
	Description string    `json:"description,omitempty"`
	Created     time.Time `json:"created"`
	// CreatedBy is the id of the token that created this one ("" for the
	// bootstrap token).
	CreatedBy string `json:"created_by,omitempty"`
	// Expires is when the token stops working; zero: never.
	Expires time.Time `json:"expires,omitzero"`
	// Revoked is when the token was revoked; zero while it was not.
	Revoked time.Time `json:"revoked,omitzero"`
}

// Usable reports whether the token authenticates at time now.
func (t Token) Usable(now time.Time) bool {
	return t.Revoked.IsZero() && (t.Expires.IsZero() || now.Before(t.Expires))
}

// AuditEntry is one mutating call: who made it, what it was, when, and how
// it ended.
type AuditEntry struct {
	// Seq numbers entries from 1, in commit order.
	Seq uint64    `json:"seq"`
	At  time.Time `json:"at"`
	// TokenID, Tenant and Role are the caller's identity; TokenID is empty
	// for a call without a valid token.
	TokenID string `json:"token_id,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
	Role    Role   `json:"role,omitempty"`
	// Method is the RPC's short name ("SubmitJob").
	Method string `json:"method"`
	// Target is what the call acted on ("tenant/acme job/acme-3").
	Target string `json:"target,omitempty"`
	// Outcome is "ok", or the status code and message of the refusal.
	Outcome string `json:"outcome"`
}

// MaxAuditEntries is how many audit entries the FSM keeps: the oldest go
// first.
const MaxAuditEntries = 10000

// ---- Commands ---------------------------------------------------------

// SetQuota replaces a tenant's quota. Apply result: Tenant.
type SetQuota struct {
	Tenant string `json:"tenant"`
	Quota  Quota  `json:"quota"`
}

// DeleteTenant removes a tenant with its modules, tokens and terminal
// jobs. It is refused while the tenant has a job that is not terminal, and
// for the default tenant. Apply result: Tenant (as it was).
type DeleteTenant struct {
	ID string `json:"id"`
}

// CreateToken records a token. Apply result: Token.
type CreateToken struct {
	Token Token `json:"token"`
}

// RevokeToken revokes a token; revoking a revoked token changes nothing.
// When Tenant is set, the token must be of that tenant (a developer
// revoking its own tenant's tokens). Apply result: Token.
type RevokeToken struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant,omitempty"`
}

// RecordAudit appends an audit entry; the FSM numbers it and stamps it
// with the command's time. Apply result: AuditEntry.
type RecordAudit struct {
	Entry AuditEntry `json:"entry"`
}

// Command types of tenancy.
const (
	TypeSetQuota     CommandType = "set_quota"
	TypeDeleteTenant CommandType = "delete_tenant"
	TypeCreateToken  CommandType = "create_token"
	TypeRevokeToken  CommandType = "revoke_token"
	TypeRecordAudit  CommandType = "record_audit"
)

func init() {
	newCommand[TypeSetQuota] = func() Command { return &SetQuota{} }
	newCommand[TypeDeleteTenant] = func() Command { return &DeleteTenant{} }
	newCommand[TypeCreateToken] = func() Command { return &CreateToken{} }
	newCommand[TypeRevokeToken] = func() Command { return &RevokeToken{} }
	newCommand[TypeRecordAudit] = func() Command { return &RecordAudit{} }
}

func (*SetQuota) Type() CommandType     { return TypeSetQuota }
func (*DeleteTenant) Type() CommandType { return TypeDeleteTenant }
func (*CreateToken) Type() CommandType  { return TypeCreateToken }
func (*RevokeToken) Type() CommandType  { return TypeRevokeToken }
func (*RecordAudit) Type() CommandType  { return TypeRecordAudit }

func (c *SetQuota) validate() error {
	if err := checkTenantID(c.Tenant); err != nil {
		return err
	}
	return c.Quota.validate()
}

func (c *DeleteTenant) validate() error { return checkTenantID(c.ID) }

func (c *CreateToken) validate() error {
	t := c.Token
	if err := checkID("token", t.ID); err != nil {
		return err
	}
	if err := checkTenantID(t.Tenant); err != nil {
		return err
	}
	if !t.Role.Valid() {
		return fmt.Errorf("token %s: role %q: %w", t.ID, t.Role, ErrMalformed)
	}
	if len(t.Hash) != 64 {
		return fmt.Errorf("token %s: hash is not a hex SHA-256: %w", t.ID, ErrMalformed)
	}
	if len(t.Description) > 256 {
		return fmt.Errorf("token %s: description longer than 256 bytes: %w", t.ID, ErrMalformed)
	}
	return nil
}

func (c *RevokeToken) validate() error { return checkID("token", c.ID) }

func (c *RecordAudit) validate() error {
	if c.Entry.Method == "" {
		return fmt.Errorf("audit entry without a method: %w", ErrMalformed)
	}
	if len(c.Entry.Target)+len(c.Entry.Outcome) > 4096 {
		return fmt.Errorf("audit entry longer than 4 KiB: %w", ErrMalformed)
	}
	return nil
}

// ---- Apply ------------------------------------------------------------

func (a *applier) applyTenancy(cmd Command) (any, bool, error) {
	switch c := cmd.(type) {
	case *SetQuota:
		t, ok := a.st.tenants[c.Tenant]
		if !ok {
			return nil, true, fmt.Errorf("tenant %q: %w", c.Tenant, ErrTenantNotFound)
		}
		t.Quota = c.Quota
		return *t, true, nil
	case *DeleteTenant:
		res, err := a.deleteTenant(c)
		return res, true, err
	case *CreateToken:
		if _, ok := a.st.tenants[c.Token.Tenant]; !ok {
			return nil, true, fmt.Errorf("tenant %q: %w", c.Token.Tenant, ErrTenantNotFound)
		}
		if _, dup := a.st.tokens[c.Token.ID]; dup {
			return nil, true, fmt.Errorf("token %s: %w", c.Token.ID, ErrTokenExists)
		}
		t := c.Token
		t.Created = a.at
		t.Revoked = time.Time{}
		a.st.tokens[t.ID] = &t
		return t, true, nil
	case *RevokeToken:
		t, ok := a.st.tokens[c.ID]
		if !ok || c.Tenant != "" && t.Tenant != c.Tenant {
			return nil, true, fmt.Errorf("token %s: %w", c.ID, ErrTokenNotFound)
		}
		if t.Revoked.IsZero() {
			t.Revoked = a.at
		}
		return *t, true, nil
	case *RecordAudit:
		a.st.auditSeq++
		e := c.Entry
		e.Seq = a.st.auditSeq
		e.At = a.at
		a.st.audit = append(a.st.audit, e)
		if over := len(a.st.audit) - MaxAuditEntries; over > 0 {
			a.st.audit = slices.Delete(a.st.audit, 0, over)
		}
		return e, true, nil
	}
	return nil, false, nil
}

func (a *applier) deleteTenant(c *DeleteTenant) (any, error) {
	t, ok := a.st.tenants[c.ID]
	if !ok {
		return nil, fmt.Errorf("tenant %q: %w", c.ID, ErrTenantNotFound)
	}
	if c.ID == DefaultTenant {
		return nil, fmt.Errorf("tenant %q cannot be deleted: %w", c.ID, ErrTenantInUse)
	}
	if live := a.st.usage(c.ID).Jobs; live > 0 {
		return nil, fmt.Errorf("tenant %q has %d jobs that have not ended: cancel them first: %w", c.ID, live, ErrTenantInUse)
	}
	for id, j := range a.st.jobs {
		if j.Tenant == c.ID {
			delete(a.st.jobs, id)
		}
	}
	for k := range a.st.modules {
		if k.tenant == c.ID {
			delete(a.st.modules, k)
		}
	}
	for id, tok := range a.st.tokens {
		if tok.Tenant == c.ID {
			delete(a.st.tokens, id)
		}
	}
	delete(a.st.tenants, c.ID)
	return *t, nil
}

// ---- Queries ----------------------------------------------------------

// Token returns one token by id.
func (f *FSM) Token(id string) (Token, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.st.tokens[id]
	if !ok {
		return Token{}, fmt.Errorf("token %s: %w", id, ErrTokenNotFound)
	}
	return *t, nil
}

// Tokens returns the tokens of a tenant ("" for every tenant), sorted by
// id.
func (f *FSM) Tokens(tenant string) []Token {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []Token
	for _, id := range slices.Sorted(maps.Keys(f.st.tokens)) {
		if t := f.st.tokens[id]; tenant == "" || t.Tenant == tenant {
			out = append(out, *t)
		}
	}
	return out
}

// Audit returns the audit entries with a sequence number above after,
// oldest first, at most limit of them (0: all).
func (f *FSM) Audit(after uint64, limit int) []AuditEntry {
	f.mu.RLock()
	defer f.mu.RUnlock()
	i, _ := slices.BinarySearchFunc(f.st.audit, after+1, func(e AuditEntry, seq uint64) int {
		switch {
		case e.Seq < seq:
			return -1
		case e.Seq > seq:
			return 1
		}
		return 0
	})
	out := f.st.audit[i:]
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return slices.Clone(out)
}
