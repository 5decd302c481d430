// Package auth is the coordinator's side of API tokens: how a token is
// made, what it looks like on the wire, how its secret is hashed for the
// FSM, and which role each Control method needs.
//
// A token is "eddy_" + 16 hex digits of public id + "_" + 64 hex digits of
// secret (256 random bits). Only the SHA-256 of the secret is stored; the
// id finds the record, the hash is compared in constant time. Clients send
// it as "authorization: Bearer <token>" gRPC metadata (proto/rpc).
//
// It is not the place for the identity checks themselves (the coordinator
// does them against its FSM) nor for transport security (proto/rpc).
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/eddy-stream/eddy/scheduler/fsm"
)

// ErrMalformed is matched by the errors of Parse and FromHeader. Their
// messages never contain the token.
var ErrMalformed = errors.New("auth: malformed token")

const (
	prefix    = "eddy_"
	idLen     = 16 // hex digits: 64 bits, enough to name, not to guess
	secretLen = 64 // hex digits: 256 bits
	// Len is the length of every token.
	Len = len(prefix) + idLen + 1 + secretLen
)

// Token is a parsed token.
type Token struct {
	ID     string
	secret string
}

// New makes a token from rnd (crypto/rand.Reader when nil) and returns its
// wire form, shown once to its owner, and its parsed form.
func New(rnd io.Reader) (string, Token, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	var b [idLen/2 + secretLen/2]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return "", Token{}, fmt.Errorf("auth: new token: %w", err)
	}
	t := Token{ID: hex.EncodeToString(b[:idLen/2]), secret: hex.EncodeToString(b[idLen/2:])}
	return prefix + t.ID + "_" + t.secret, t, nil
}

// Parse reads a token's wire form.
func Parse(s string) (Token, error) {
	if len(s) != Len || !strings.HasPrefix(s, prefix) || s[len(prefix)+idLen] != '_' {
		return Token{}, fmt.Errorf("not an Eddy API token (want eddy_ followed by %d characters): %w", Len-len(prefix), ErrMalformed)
	}
	id, secret := s[len(prefix):len(prefix)+idLen], s[len(prefix)+idLen+1:]
	if !lowerHex(id) || !lowerHex(secret) {
		return Token{}, fmt.Errorf("not an Eddy API token (not hexadecimal): %w", ErrMalformed)
	}
	return Token{ID: id, secret: secret}, nil
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Hash is the lower-case hex SHA-256 of the token's secret: what the FSM
// stores.
func (t Token) Hash() string {
	sum := sha256.Sum256([]byte(t.secret))
	return hex.EncodeToString(sum[:])
}

// Matches reports, in constant time, whether the token's secret hashes to
// hash.
func (t Token) Matches(hash string) bool {
	return subtle.ConstantTimeCompare([]byte(t.Hash()), []byte(hash)) == 1
}

// FromHeader reads the value of an authorization header:
// "Bearer <token>" (the scheme case-insensitive, as RFC 6750 allows).
func FromHeader(v string) (Token, error) {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return Token{}, fmt.Errorf("the authorization metadata is not \"Bearer <token>\": %w", ErrMalformed)
	}
	return Parse(strings.TrimSpace(rest))
}

// Access is what a method needs.
type Access struct {
	// Role is the least role that may call it.
	Role fsm.Role
	// Mutates marks the calls the audit log records.
	Mutates bool
}

// Methods maps every Control method's short name to its access. A method
// missing here is refused to everyone (see For).
var Methods = map[string]Access{
	"UploadModule":     {fsm.RoleDeveloper, true},
	"ListModules":      {fsm.RoleViewer, false},
	"GetModule":        {fsm.RoleViewer, false},
	"SubmitJob":        {fsm.RoleDeveloper, true},
	"ListJobs":         {fsm.RoleViewer, false},
	"JobStatus":        {fsm.RoleViewer, false},
	"JobLogs":          {fsm.RoleViewer, false},
	"CancelJob":        {fsm.RoleDeveloper, true},
	"TriggerSavepoint": {fsm.RoleDeveloper, true},
	"SwapModule":       {fsm.RoleDeveloper, true},
	"Join":             {fsm.RoleAdmin, true},
	"Leave":            {fsm.RoleAdmin, true},
	"ClusterInfo":      {fsm.RoleAdmin, false},
	"CreateTenant":     {fsm.RoleAdmin, true},
	"ListTenants":      {fsm.RoleAdmin, false},
	"DeleteTenant":     {fsm.RoleAdmin, true},
	"SetQuota":         {fsm.RoleAdmin, true},
	// Developers manage their own tenant's tokens; the handlers check the
	// tenant and the role granted.
	"CreateToken": {fsm.RoleDeveloper, true},
	"ListTokens":  {fsm.RoleDeveloper, false},
	"RevokeToken": {fsm.RoleDeveloper, true},
	"ListAudit":   {fsm.RoleAdmin, false},
	"WhoAmI":      {fsm.RoleViewer, false},
}

// For returns the access of a method, by its full gRPC name
// ("/eddy.v1.Control/SubmitJob") or its short one; an unknown method
// needs a role nobody has, so that a method added without an entry here
// is refused rather than open.
func For(method string) (string, Access) {
	short := method[strings.LastIndexByte(method, '/')+1:]
	a, ok := Methods[short]
	if !ok {
		return short, Access{Role: "nobody", Mutates: true}
	}
	return short, a
}
