package coordinator

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
	"github.com/eddy-stream/eddy/scheduler/auth"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

func (s *controlServer) CreateToken(ctx context.Context, req *eddyv1.CreateTokenRequest) (*eddyv1.CreateTokenResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_CreateToken_FullMethodName, req,
		func() *eddyv1.CreateTokenResponse { return new(eddyv1.CreateTokenResponse) }, s.c.createToken)
}

func (s *controlServer) ListTokens(ctx context.Context, req *eddyv1.ListTokensRequest) (*eddyv1.ListTokensResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_ListTokens_FullMethodName, req,
		func() *eddyv1.ListTokensResponse { return new(eddyv1.ListTokensResponse) }, s.c.listTokens)
}

func (s *controlServer) RevokeToken(ctx context.Context, req *eddyv1.RevokeTokenRequest) (*eddyv1.RevokeTokenResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_RevokeToken_FullMethodName, req,
		func() *eddyv1.RevokeTokenResponse { return new(eddyv1.RevokeTokenResponse) }, s.c.revokeToken)
}

func (s *controlServer) ListAudit(ctx context.Context, req *eddyv1.ListAuditRequest) (*eddyv1.ListAuditResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_ListAudit_FullMethodName, req,
		func() *eddyv1.ListAuditResponse { return new(eddyv1.ListAuditResponse) }, s.c.listAudit)
}

func (s *controlServer) WhoAmI(ctx context.Context, req *eddyv1.WhoAmIRequest) (*eddyv1.WhoAmIResponse, error) {
	return serve(ctx, s.c, eddyv1.Control_WhoAmI_FullMethodName, req,
		func() *eddyv1.WhoAmIResponse { return new(eddyv1.WhoAmIResponse) }, s.c.whoAmI)
}

var roleToAPI = map[fsm.Role]eddyv1.Role{
	fsm.RoleAdmin:     eddyv1.Role_ROLE_ADMIN,
	fsm.RoleDeveloper: eddyv1.Role_ROLE_DEVELOPER,
	fsm.RoleViewer:    eddyv1.Role_ROLE_VIEWER,
}

func roleFromAPI(r eddyv1.Role) fsm.Role {
	for role, api := range roleToAPI {
		if api == r {
			return role
		}
	}
	return ""
}

func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func tokenInfo(t fsm.Token) *eddyv1.TokenInfo {
	return &eddyv1.TokenInfo{
		Id:            t.ID,
		Tenant:        t.Tenant,
		Role:          roleToAPI[t.Role],
		Description:   t.Description,
		CreatedUnixMs: unixMs(t.Created),
		ExpiresUnixMs: unixMs(t.Expires),
		RevokedUnixMs: unixMs(t.Revoked),
		CreatedBy:     t.CreatedBy,
	}
}

// maxTokenTTL bounds a token's lifetime when one is asked for, so that
// now+ttl stays a time the FSM encodes.
const maxTokenTTL = 100 * 365 * 24 * time.Hour

func (c *Coordinator) createToken(ctx context.Context, _ *term, req *eddyv1.CreateTokenRequest) (*eddyv1.CreateTokenResponse, error) {
	caller, _ := callerOf(ctx)
	tenant, err := c.tenantOf(ctx, req.GetTenant())
	if err != nil {
		return nil, err
	}
	role := roleFromAPI(req.GetRole())
	switch {
	case role == "":
		return nil, invalid("a token needs a role: admin, developer or viewer")
	case role == fsm.RoleAdmin && tenant != fsm.DefaultTenant:
		return nil, invalid("admin tokens belong to tenant %s, the cluster's operators (an admin acts on every tenant)", fsm.DefaultTenant)
	case !caller.Role.AtLeast(role) || caller.Role != fsm.RoleAdmin && role == fsm.RoleAdmin:
		return nil, status.Errorf(codes.PermissionDenied, "token %s (%s) may not create %s tokens", caller.ID, caller.Role, role)
	case len(req.GetDescription()) > 256:
		return nil, invalid("a token's description is at most 256 bytes")
	case req.GetTtlSeconds() > uint64(maxTokenTTL/time.Second):
		return nil, invalid("a token's lifetime is at most %s", maxTokenTTL)
	}
	wire, tok, err := auth.New(nil)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	rec := fsm.Token{ID: tok.ID, Tenant: tenant, Role: role, Hash: tok.Hash(), Description: req.GetDescription(), CreatedBy: caller.ID}
	if ttl := req.GetTtlSeconds(); ttl > 0 {
		rec.Expires = c.now().Add(time.Duration(ttl) * time.Second).Truncate(time.Millisecond)
	}
	res, err := c.propose(ctx, &fsm.CreateToken{Token: rec})
	if err != nil {
		return nil, err
	}
	rec = res.(fsm.Token)
	c.log.Info("token created", "token", rec.ID, "tenant", rec.Tenant, "role", rec.Role, "by", caller.ID)
	return &eddyv1.CreateTokenResponse{Token: tokenInfo(rec), Secret: wire}, nil
}

func (c *Coordinator) listTokens(ctx context.Context, _ *term, req *eddyv1.ListTokensRequest) (*eddyv1.ListTokensResponse, error) {
	caller, _ := callerOf(ctx)
	tenant := req.GetTenant()
	if caller.Role != fsm.RoleAdmin || tenant != "" {
		var err error
		if tenant, err = c.tenantOf(ctx, tenant); err != nil {
			return nil, err
		}
	}
	resp := &eddyv1.ListTokensResponse{}
	for _, t := range c.fsm.Tokens(tenant) {
		resp.Tokens = append(resp.Tokens, tokenInfo(t))
	}
	return resp, nil
}

func (c *Coordinator) revokeToken(ctx context.Context, _ *term, req *eddyv1.RevokeTokenRequest) (*eddyv1.RevokeTokenResponse, error) {
	caller, _ := callerOf(ctx)
	cmd := &fsm.RevokeToken{ID: req.GetId()}
	t, err := c.fsm.Token(req.GetId())
	if caller.Role != fsm.RoleAdmin {
		cmd.Tenant = caller.Tenant
		if err == nil && t.Tenant != caller.Tenant {
			err = fsm.ErrTokenNotFound // another tenant's token is absent
		}
		// A developer revokes its tenant's tokens of its own role or
		// below.
		if err == nil && !caller.Role.AtLeast(t.Role) {
			return nil, status.Errorf(codes.PermissionDenied, "token %s (%s) may not revoke %s tokens", caller.ID, caller.Role, t.Role)
		}
	}
	if err != nil {
		return nil, notFound("token %s not found", req.GetId())
	}
	res, err := c.propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	t = res.(fsm.Token)
	c.log.Info("token revoked", "token", t.ID, "tenant", t.Tenant, "by", caller.ID)
	return &eddyv1.RevokeTokenResponse{Token: tokenInfo(t)}, nil
}

// auditPage bounds one ListAudit answer.
const (
	auditPageDefault = 100
	auditPageMax     = 1000
)

func (c *Coordinator) listAudit(_ context.Context, _ *term, req *eddyv1.ListAuditRequest) (*eddyv1.ListAuditResponse, error) {
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = auditPageDefault
	}
	limit = min(limit, auditPageMax)
	resp := &eddyv1.ListAuditResponse{}
	after := req.GetAfterSeq()
	for len(resp.Entries) < limit {
		page := c.fsm.Audit(after, limit)
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			after = e.Seq
			if req.GetTenant() != "" && e.Tenant != req.GetTenant() {
				continue
			}
			resp.Entries = append(resp.Entries, &eddyv1.AuditEntry{Seq: e.Seq, AtUnixMs: e.At.UnixMilli(), TokenId: e.TokenID,
				Tenant: e.Tenant, Role: roleToAPI[e.Role], Method: e.Method, Target: e.Target, Outcome: e.Outcome})
			if len(resp.Entries) == limit {
				break
			}
		}
	}
	return resp, nil
}

func (c *Coordinator) whoAmI(ctx context.Context, _ *term, _ *eddyv1.WhoAmIRequest) (*eddyv1.WhoAmIResponse, error) {
	caller, _ := callerOf(ctx)
	return &eddyv1.WhoAmIResponse{Token: tokenInfo(caller)}, nil
}
