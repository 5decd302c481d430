package coordinator

// Authentication and authorization of Control calls. Every call is served
// by the leader (followers forward it with the caller's authorization
// metadata), so a token is checked against the leader's FSM, where a
// revocation commits before RevokeToken returns: it takes effect at once
// through every member.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/eddy-stream/eddy/internal/atomicfile"
	"github.com/eddy-stream/eddy/proto/rpc"
	"github.com/eddy-stream/eddy/scheduler/auth"
	"github.com/eddy-stream/eddy/scheduler/fsm"
)

type identityKey struct{}

// callerOf returns the token a call was authenticated with.
func callerOf(ctx context.Context) (fsm.Token, bool) {
	t, ok := ctx.Value(identityKey{}).(fsm.Token)
	return t, ok
}

// noToken is what a call without credentials is told.
const noToken = "this call needs an API token: set EDDY_TOKEN or add one with eddy context set (a new cluster's first coordinator writes an admin token to admin.token in its data directory)"

// authenticate finds the token of a call. Its errors are UNAUTHENTICATED
// and never contain the token.
func (c *Coordinator) authenticate(ctx context.Context) (fsm.Token, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	return c.checkToken(md.Get(rpc.AuthorizationKey))
}

// checkToken finds the token of the authorization values a call (or an
// HTTP request) carries.
func (c *Coordinator) checkToken(vals []string) (fsm.Token, error) {
	switch {
	case len(vals) == 0:
		return fsm.Token{}, status.Error(codes.Unauthenticated, noToken)
	case len(vals) > 1:
		return fsm.Token{}, status.Error(codes.Unauthenticated, "the call carries more than one authorization")
	}
	tok, err := auth.FromHeader(vals[0])
	if err != nil {
		return fsm.Token{}, status.Error(codes.Unauthenticated, strings.TrimSuffix(err.Error(), ": "+auth.ErrMalformed.Error()))
	}
	rec, err := c.fsm.Token(tok.ID)
	if err != nil || !tok.Matches(rec.Hash) {
		// One answer for an unknown id and a wrong secret.
		return fsm.Token{}, status.Error(codes.Unauthenticated, "invalid API token")
	}
	now := c.now()
	switch {
	case !rec.Revoked.IsZero():
		return fsm.Token{}, status.Errorf(codes.Unauthenticated, "API token %s was revoked", rec.ID)
	case !rec.Usable(now):
		return fsm.Token{}, status.Errorf(codes.Unauthenticated, "API token %s expired at %s", rec.ID, rec.Expires.UTC().Format(time.RFC3339))
	}
	return rec, nil
}

// authorize checks that tok may call method.
func authorize(tok fsm.Token, short string, access auth.Access) error {
	if tok.Role.AtLeast(access.Role) {
		return nil
	}
	if !access.Role.Valid() {
		return status.Errorf(codes.PermissionDenied, "%s is not open to any token", short)
	}
	return status.Errorf(codes.PermissionDenied, "token %s (%s of tenant %s) may not call %s: it needs the %s role", tok.ID, tok.Role, tok.Tenant, short, access.Role)
}

// tenantOf resolves the tenant a call acts on: the caller's, whatever the
// request says, unless the caller is an admin, who may name any. A
// non-admin naming another tenant is told it does not exist, as for
// anything else of another tenant.
func (c *Coordinator) tenantOf(ctx context.Context, field string) (string, error) {
	tok, ok := callerOf(ctx)
	if !ok {
		return "", status.Error(codes.Unauthenticated, noToken)
	}
	id := tok.Tenant
	switch {
	case tok.Role == fsm.RoleAdmin:
		id = rpc.Tenant(field)
	case field != "" && field != tok.Tenant:
		return "", notFound("tenant %q not found", field)
	}
	if _, err := c.fsm.Tenant(id); err != nil {
		return "", notFound("tenant %q not found", id)
	}
	return id, nil
}

// auditTimeout bounds the commit of one audit entry.
const auditTimeout = 5 * time.Second

// audit records a mutating call in the FSM's audit log. A failure to
// record is logged: the call's own outcome stands.
func (c *Coordinator) audit(ctx context.Context, tok fsm.Token, method string, req any, err error) {
	outcome := "ok"
	if err != nil {
		s := status.Convert(err)
		outcome = s.Code().String() + ": " + oneLine(s.Message())
	}
	e := fsm.AuditEntry{TokenID: tok.ID, Tenant: tok.Tenant, Role: tok.Role, Method: method, Target: auditTarget(req), Outcome: outcome}
	if len(e.Outcome) > 1024 {
		e.Outcome = e.Outcome[:1024]
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	if _, err := c.propose(actx, &fsm.RecordAudit{Entry: e}); err != nil {
		c.log.Warn("audit entry not recorded", "method", method, "token", tok.ID, "err", err)
	}
}

// auditTarget names what a request acts on, from the fields requests
// share.
func auditTarget(req any) string {
	var parts []string
	add := func(kind, v string) {
		if v != "" && len(v) <= 256 {
			parts = append(parts, kind+"/"+v)
		}
	}
	if r, ok := req.(interface{ GetTenant() string }); ok {
		add("tenant", r.GetTenant())
	}
	if r, ok := req.(interface{ GetId() string }); ok {
		add("id", r.GetId())
	}
	if r, ok := req.(interface{ GetJobId() string }); ok {
		add("job", r.GetJobId())
	}
	if r, ok := req.(interface{ GetName() string }); ok {
		add("module", r.GetName())
	}
	if r, ok := req.(interface{ GetNodeId() string }); ok {
		add("coordinator", r.GetNodeId())
	}
	if r, ok := req.(interface{ GetFromSavepoint() string }); ok {
		add("savepoint", r.GetFromSavepoint())
	}
	return strings.Join(parts, " ")
}

// forwardCredentials copies the caller's authorization into the metadata
// of the call a follower forwards, so the leader authenticates the caller,
// not the follower.
func forwardCredentials(in, out context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(in)
	for _, v := range md.Get(rpc.AuthorizationKey) {
		out = metadata.AppendToOutgoingContext(out, rpc.AuthorizationKey, v)
	}
	return out
}

// AdminTokenFileName is the file in a bootstrap coordinator's data
// directory that holds the first admin token.
const AdminTokenFileName = "admin.token"

// bootstrapToken makes the cluster's first admin token when the FSM has no
// token at all, and writes it to cfg.AdminTokenFile (mode 0600) before the
// token is committed, so that a token that works is never lost; a failed
// commit leaves a file that a later term overwrites.
func (c *Coordinator) bootstrapToken(ctx context.Context) {
	defer c.tokenOnce.Do(func() { close(c.tokenReady) })
	path := c.cfg.AdminTokenFile
	if path == "" && c.cfg.BootstrapToken == "" || len(c.fsm.Tokens("")) > 0 {
		return
	}
	wire, tok, err := auth.New(nil)
	if c.cfg.BootstrapToken != "" {
		wire = c.cfg.BootstrapToken
		tok, err = auth.Parse(wire)
	}
	if err == nil && path != "" {
		err = writeSecret(path, wire)
	}
	if err == nil {
		_, err = c.propose(ctx, &fsm.CreateToken{Token: fsm.Token{ID: tok.ID, Tenant: fsm.DefaultTenant, Role: fsm.RoleAdmin,
			Hash: tok.Hash(), Description: "bootstrap admin token"}})
	}
	if err != nil {
		if ctx.Err() == nil {
			c.log.Error("bootstrap admin token", "err", err)
		}
		return
	}
	c.tokenMu.Lock()
	c.adminToken = wire
	c.tokenMu.Unlock()
	c.log.Info("admin token made", "path", path, "token", tok.ID)
}

// writeSecret writes a file readable by its owner only, atomically.
func writeSecret(path, secret string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, []byte(secret+"\n"), 0o600)
}

// AdminTokenFile is where this member writes the bootstrap admin token
// ("" for none).
func (c *Coordinator) AdminTokenFile() string { return c.cfg.AdminTokenFile }

// AdminToken returns the admin token this coordinator made when it
// bootstrapped the cluster (waiting for it while the first term starts),
// or the one in cfg.AdminTokenFile: the in-process credentials of `eddy
// run` and of tests.
func (c *Coordinator) AdminToken(ctx context.Context) (string, error) {
	for {
		c.tokenMu.Lock()
		wire := c.adminToken
		c.tokenMu.Unlock()
		if wire != "" {
			return wire, nil
		}
		if c.cfg.AdminTokenFile == "" {
			return "", errors.New("admin token: this coordinator has no admin token file")
		}
		data, err := os.ReadFile(c.cfg.AdminTokenFile)
		if err == nil {
			return strings.TrimSpace(string(data)), nil
		}
		select {
		case <-c.tokenReady:
			return "", fmt.Errorf("admin token: %w", err)
		default:
		}
		select {
		case <-c.tokenReady: // look again
		case <-ctx.Done():
			return "", fmt.Errorf("admin token: %w", ctx.Err())
		}
	}
}
