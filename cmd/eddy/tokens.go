package main

// eddy token, eddy audit and eddy whoami: API tokens and the audit log.

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

const tokenUsage = `usage:
  eddy token create --role admin|developer|viewer [--tenant T] [--description D] [--ttl 720h]
                                  make a token; prints it once (only its hash is kept)
  eddy token list [--tenant T]    tokens, never their secrets
  eddy token revoke ID            the token stops working at once
`

var roleNames = map[string]eddyv1.Role{
	"admin":     eddyv1.Role_ROLE_ADMIN,
	"developer": eddyv1.Role_ROLE_DEVELOPER,
	"viewer":    eddyv1.Role_ROLE_VIEWER,
}

func roleName(r eddyv1.Role) string {
	for n, v := range roleNames {
		if v == r {
			return n
		}
	}
	return "-"
}

func msTime(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

func cmdToken(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("token needs a subcommand\n" + tokenUsage)}
	}
	fs := flag.NewFlagSet("token "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	switch args[0] {
	case "create":
		var role, desc string
		var ttl time.Duration
		fs.StringVar(&role, "role", "", "admin, developer or viewer")
		fs.StringVar(&desc, "description", "", "what the token is for")
		fs.DurationVar(&ttl, "ttl", 0, "lifetime (0: it does not expire)")
		if err := parseFlags(fs, args[1:], 0, "token create takes no arguments"); err != nil {
			return err
		}
		r, ok := roleNames[role]
		if !ok {
			return usageError{fmt.Errorf("token create needs --role admin, developer or viewer (got %q)", role)}
		}
		if ttl < 0 || ttl > 0 && ttl < time.Second {
			return usageError{fmt.Errorf("--ttl %s: at least 1s, or 0 for none", ttl)}
		}
		c, ctx, done, err := cf.dial()
		if err != nil {
			return err
		}
		defer done()
		resp, err := c.CreateToken(ctx, &eddyv1.CreateTokenRequest{Tenant: cf.tenant, Role: r, Description: desc, TtlSeconds: uint64(ttl / time.Second)})
		if err != nil {
			return rpcError("token create", err)
		}
		t := resp.GetToken()
		// The secret alone on stdout, for scripts; the rest on stderr.
		fmt.Fprintln(stdout, resp.GetSecret())
		fmt.Fprintf(stderr, "token %s: %s of tenant %s, expires %s; shown once, store it now\n", t.GetId(), roleName(t.GetRole()), t.GetTenant(), msTime(t.GetExpiresUnixMs()))
	case "list":
		if err := parseFlags(fs, args[1:], 0, "token list takes no arguments"); err != nil {
			return err
		}
		c, ctx, done, err := cf.dial()
		if err != nil {
			return err
		}
		defer done()
		resp, err := c.ListTokens(ctx, &eddyv1.ListTokensRequest{Tenant: cf.tenant})
		if err != nil {
			return rpcError("token list", err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTENANT\tROLE\tCREATED\tEXPIRES\tREVOKED\tDESCRIPTION")
		for _, t := range resp.GetTokens() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.GetId(), t.GetTenant(), roleName(t.GetRole()), msTime(t.GetCreatedUnixMs()),
				msTime(t.GetExpiresUnixMs()), msTime(t.GetRevokedUnixMs()), cmp.Or(t.GetDescription(), "-"))
		}
		return tw.Flush()
	case "revoke":
		if err := parseFlags(fs, args[1:], 1, "token revoke takes a token id"); err != nil {
			return err
		}
		c, ctx, done, err := cf.dial()
		if err != nil {
			return err
		}
		defer done()
		id := fs.Arg(0)
		if strings.HasPrefix(id, "eddy_") { // the whole token: its id part
			id = tokenID(id)
		}
		resp, err := c.RevokeToken(ctx, &eddyv1.RevokeTokenRequest{Id: id})
		if err != nil {
			return rpcError("token revoke "+id, err)
		}
		fmt.Fprintf(stdout, "token %s revoked\n", resp.GetToken().GetId())
	default:
		return usageError{fmt.Errorf("unknown token subcommand %q\n%s", args[0], tokenUsage)}
	}
	return nil
}

func cmdAudit(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "list" {
		return usageError{errors.New("usage: eddy audit list [--tenant T] [--after SEQ] [--limit N]   mutating calls: who, what, when, outcome (admins)")}
	}
	fs := flag.NewFlagSet("audit list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	var after uint64
	var limit uint
	fs.Uint64Var(&after, "after", 0, "entries after this sequence number")
	fs.UintVar(&limit, "limit", 100, "at most this many entries (at most 1000)")
	if err := parseFlags(fs, args[1:], 0, "audit list takes no arguments"); err != nil {
		return err
	}
	c, ctx, done, err := cf.dial()
	if err != nil {
		return err
	}
	defer done()
	resp, err := c.ListAudit(ctx, &eddyv1.ListAuditRequest{AfterSeq: after, Limit: uint32(min(limit, 1000)), Tenant: cf.tenant})
	if err != nil {
		return rpcError("audit list", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tTOKEN\tTENANT\tROLE\tMETHOD\tTARGET\tOUTCOME")
	for _, e := range resp.GetEntries() {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.GetSeq(), msTime(e.GetAtUnixMs()), cmp.Or(e.GetTokenId(), "-"), cmp.Or(e.GetTenant(), "-"),
			roleName(e.GetRole()), e.GetMethod(), cmp.Or(e.GetTarget(), "-"), e.GetOutcome())
	}
	return tw.Flush()
}

func cmdWhoAmI(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("whoami", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	if err := parseFlags(fs, args, 0, "whoami takes no arguments"); err != nil {
		return err
	}
	c, ctx, done, err := cf.dial()
	if err != nil {
		return err
	}
	defer done()
	resp, err := c.WhoAmI(ctx, &eddyv1.WhoAmIRequest{})
	if err != nil {
		return rpcError("whoami", err)
	}
	t := resp.GetToken()
	fmt.Fprintf(stdout, "token %s: %s of tenant %s, expires %s\n", t.GetId(), roleName(t.GetRole()), t.GetTenant(), msTime(t.GetExpiresUnixMs()))
	return nil
}
