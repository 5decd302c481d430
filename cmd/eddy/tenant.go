package main

// eddy tenant: an admin's commands for tenants and their quotas.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	eddyv1 "github.com/eddy-stream/eddy/proto/eddy/v1"
)

const tenantUsage = `usage:
  eddy tenant create ID [quota flags]   create a tenant
  eddy tenant list                      tenants with their quotas and usage
  eddy tenant delete ID                 delete a tenant whose jobs have all ended, with its modules
  eddy tenant quota ID [quota flags]    change the quotas the flags name; with none, print the quota

quota flags (0: no limit; sizes take KiB, MiB, GiB, TiB or KB, MB, GB, TB):
  --slots N --jobs N --modules N --module-bytes SIZE --memory-bytes SIZE
  --call-timeout DURATION --emit-bytes SIZE --emit-records N --state-bytes SIZE
  --checkpoint-bytes SIZE --cpu-share N
`

// quotaFlags fill a TenantQuota with the fields whose flags are given, so
// that `eddy tenant quota` changes only those.
type quotaFlags struct{ q eddyv1.TenantQuota }

func (f *quotaFlags) register(fs *flag.FlagSet) {
	count := func(name, help string, dst **uint32) {
		fs.Func(name, help+" (0: no limit)", func(s string) error {
			v, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				return fmt.Errorf("want a whole number, got %q", s)
			}
			n := uint32(v)
			*dst = &n
			return nil
		})
	}
	size := func(name, help string, dst **uint64) {
		fs.Func(name, help+" (0: no limit)", func(s string) error {
			v, err := parseSize(s)
			if err != nil {
				return err
			}
			*dst = &v
			return nil
		})
	}
	count("slots", "worker slots the tenant's jobs may hold at once", &f.q.Slots)
	count("jobs", "jobs that have not ended", &f.q.Jobs)
	count("modules", "module versions registered", &f.q.Modules)
	size("module-bytes", "size of one module", &f.q.ModuleBytes)
	size("memory-bytes", "linear memory of one operator instance", &f.q.MemoryBytes)
	fs.Func("call-timeout", "deadline of one operator call (one batch), e.g. 2s (0: no limit)", func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return fmt.Errorf("want a duration such as 500ms or 2s, got %q", s)
		}
		ms := uint64(d.Milliseconds())
		if d > 0 && ms == 0 {
			ms = 1
		}
		f.q.CallTimeoutMs = &ms
		return nil
	})
	size("emit-bytes", "bytes one operator call may emit", &f.q.EmitBytes)
	size("emit-records", "records one operator call may emit", &f.q.EmitRecords)
	size("state-bytes", "keyed state of one job", &f.q.StateBytes)
	size("checkpoint-bytes", "checkpoint and savepoint storage of all the tenant's jobs", &f.q.CheckpointBytes)
	count("cpu-share", "weight of the tenant's tasks in a worker's CPU (0 counts as 1)", &f.q.CpuShare)
}

// set reports whether any quota flag was given.
func (f *quotaFlags) set() bool {
	q := &f.q
	return q.Slots != nil || q.Jobs != nil || q.Modules != nil || q.ModuleBytes != nil || q.MemoryBytes != nil ||
		q.CallTimeoutMs != nil || q.EmitBytes != nil || q.EmitRecords != nil || q.StateBytes != nil ||
		q.CheckpointBytes != nil || q.CpuShare != nil
}

// sizeUnits are the suffixes parseSize takes, longest first so that "MiB"
// is not read as "B".
var sizeUnits = []struct {
	suffix string
	factor uint64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// parseSize reads a byte count: "1048576", "64MiB", "1.5GiB", "10MB".
func parseSize(s string) (uint64, error) {
	num, factor := strings.TrimSpace(s), uint64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, factor = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.factor
			break
		}
	}
	if v, err := strconv.ParseUint(num, 10, 64); err == nil {
		if factor > 1 && v > math.MaxUint64/factor {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return v * factor, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("want a size such as 1048576, 64MiB or 10MB, got %q", s)
	}
	if v := f * float64(factor); v < math.MaxUint64/2 {
		return uint64(v), nil
	}
	return 0, fmt.Errorf("size %q is too large", s)
}

func cmdTenant(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("tenant needs a subcommand\n" + tenantUsage)}
	}
	fs := flag.NewFlagSet("tenant "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs)
	var qf quotaFlags
	switch args[0] {
	case "create":
		qf.register(fs)
		if err := parseFlags(fs, args[1:], 1, "tenant create takes one tenant ID"); err != nil {
			return err
		}
		c, ctx, done, err := cf.dial()
		if err != nil {
			return err
		}
		defer done()
		resp, err := c.CreateTenant(ctx, &eddyv1.CreateTenantRequest{Id: fs.Arg(0), Quota: &qf.q})
		if err != nil {
			return rpcError("create tenant "+fs.Arg(0), err)
		}
		fmt.Fprintf(stdout, "tenant %s created\n", resp.GetTenant().GetId())
		return nil
	case "list":
		if err := parseFlags(fs, args[1:], 0, "tenant list takes no arguments"); err != nil {
			return err
		}
		c, ctx, done, err := cf.dial()
		if err != nil {
			return err
		}
		defer done()
		resp, err := c.ListTenants(ctx, &eddyv1.ListTenantsRequest{})
		if err != nil {
			return rpcError("list tenants", err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TENANT\tSLOTS\tJOBS\tMODULES\tCHECKPOINT BYTES\tOTHER QUOTAS")
		for _, t := range resp.GetTenants() {
			q, u := t.GetQuota(), t.GetUsage()
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.GetId(),
				usedOf(uint64(u.GetSlots()), uint64(q.GetSlots())), usedOf(uint64(u.GetJobs()), uint64(q.GetJobs())),
				usedOf(uint64(u.GetModules()), uint64(q.GetModules())), usedOf(u.GetCheckpointBytes(), q.GetCheckpointBytes()),
				otherQuotas(q))
		}
		return tw.Flush()
	case "delete":
		if err := parseFlags(fs, args[1:], 1, "tenant delete takes one tenant ID"); err != nil {
			return err
		}
		c, ctx, done, err := cf.dial()
		if err != nil {
			return err
		}
		defer done()
		if _, err := c.DeleteTenant(ctx, &eddyv1.DeleteTenantRequest{Id: fs.Arg(0)}); err != nil {
			return rpcError("delete tenant "+fs.Arg(0), err)
		}
		fmt.Fprintf(stdout, "tenant %s deleted\n", fs.Arg(0))
		return nil
	case "quota":
		qf.register(fs)
		if err := parseFlags(fs, args[1:], 1, "tenant quota takes one tenant ID"); err != nil {
			return err
		}
		id := fs.Arg(0)
		c, ctx, done, err := cf.dial()
		if err != nil {
			return err
		}
		defer done()
		var info *eddyv1.TenantInfo
		if qf.set() {
			resp, err := c.SetQuota(ctx, &eddyv1.SetQuotaRequest{Tenant: id, Quota: &qf.q})
			if err != nil {
				return rpcError("set the quota of tenant "+id, err)
			}
			info = resp.GetTenant()
		} else {
			resp, err := c.ListTenants(ctx, &eddyv1.ListTenantsRequest{})
			if err != nil {
				return rpcError("quota of tenant "+id, err)
			}
			for _, t := range resp.GetTenants() {
				if t.GetId() == id {
					info = t
				}
			}
			if info == nil {
				return fmt.Errorf("quota of tenant %s: tenant %s not found", id, id)
			}
		}
		return printQuota(stdout, info)
	}
	return usageError{fmt.Errorf("unknown tenant subcommand %q\n%s", args[0], tenantUsage)}
}

// usedOf writes usage against a limit: "3/4", or "3/-" without one.
func usedOf(used, limit uint64) string {
	if limit == 0 {
		return fmt.Sprintf("%d/-", used)
	}
	return fmt.Sprintf("%d/%d", used, limit)
}

// quotaRows are a quota's fields in the flags' order and names, with the
// value set ("" for no limit).
func quotaRows(q *eddyv1.TenantQuota) [][2]string {
	n32 := func(v *uint32) string {
		if v == nil || *v == 0 {
			return ""
		}
		return strconv.FormatUint(uint64(*v), 10)
	}
	n64 := func(v *uint64) string {
		if v == nil || *v == 0 {
			return ""
		}
		return strconv.FormatUint(*v, 10)
	}
	timeout := ""
	if q.GetCallTimeoutMs() > 0 {
		timeout = (time.Duration(min(q.GetCallTimeoutMs(), math.MaxInt64/uint64(time.Millisecond))) * time.Millisecond).String()
	}
	return [][2]string{
		{"slots", n32(q.Slots)}, {"jobs", n32(q.Jobs)}, {"modules", n32(q.Modules)},
		{"module-bytes", n64(q.ModuleBytes)}, {"memory-bytes", n64(q.MemoryBytes)}, {"call-timeout", timeout},
		{"emit-bytes", n64(q.EmitBytes)}, {"emit-records", n64(q.EmitRecords)}, {"state-bytes", n64(q.StateBytes)},
		{"checkpoint-bytes", n64(q.CheckpointBytes)}, {"cpu-share", n32(q.CpuShare)},
	}
}

// otherQuotas lists the quotas the list's columns do not show, as
// name=value.
func otherQuotas(q *eddyv1.TenantQuota) string {
	var out []string
	for _, r := range quotaRows(q) {
		switch r[0] {
		case "slots", "jobs", "modules", "checkpoint-bytes":
			continue
		}
		if r[1] != "" {
			out = append(out, r[0]+"="+r[1])
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, " ")
}

func printQuota(w io.Writer, t *eddyv1.TenantInfo) error {
	u := t.GetUsage()
	usage := map[string]string{
		"slots": strconv.Itoa(int(u.GetSlots())), "jobs": strconv.Itoa(int(u.GetJobs())),
		"modules": strconv.Itoa(int(u.GetModules())), "checkpoint-bytes": strconv.FormatUint(u.GetCheckpointBytes(), 10),
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "QUOTA\tLIMIT\tUSED\t(tenant %s)\n", t.GetId())
	for _, r := range quotaRows(t.GetQuota()) {
		limit := r[1]
		if limit == "" {
			limit = "none"
		}
		used := usage[r[0]]
		if used == "" {
			used = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", r[0], limit, used)
	}
	return tw.Flush()
}
