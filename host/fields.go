package host

// Version 6 (abi/ABI.md, "Version 6: fields the host extracts"): a module
// declares in eddy_open the JSON paths it reads, and the host then writes a
// field table after the entry table of every batch of eddy_process and
// eddy_process2, finding the paths natively (abi.Fields) while it encodes
// the batch. Version 7 adds number paths, whose row entry the host parses
// (abi.Fields.Extract).

import (
	"context"

	"github.com/tetratelabs/wazero/api"

	"github.com/eddy-stream/eddy/abi"
)

// fields(ptr i32, len i32)
func hostFields(ctx context.Context, mod api.Module, stack []uint64) {
	instanceFrom(ctx).hostFields(mod, uint32(stack[0]), uint32(stack[1]))
}

func (i *Instance) hostFields(mod api.Module, ptr, n uint32) {
	if i.phase != abi.ExportOpen {
		i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s called during %s; it is only valid during %s",
			i.who, abi.ImportFields, i.phaseName(), abi.ExportOpen))
	}
	if i.fields != nil {
		i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s called twice; an instance declares its fields once", i.who, abi.ImportFields))
	}
	f, err := abi.ParseFieldList(i.guestBytes(mod, abi.ImportFields, ptr, n))
	if err != nil {
		i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s: %v", i.who, abi.ImportFields, err))
	}
	if f.Numbers() && i.module.abiVersion < abi.PartsVersion {
		i.trapGuest(markf([]error{ErrTrap}, "%s: eddy.%s: the list has number paths, which need ABI version %d, but the module declares %d",
			i.who, abi.ImportFields, abi.PartsVersion, i.module.abiVersion))
	}
	i.fields = f
}

// Fields returns the paths the instance declared with the fields import
// (version 6), or nil.
func (i *Instance) Fields() [][]string {
	if i.fields == nil {
		return nil
	}
	return i.fields.Paths()
}

// writeBatch writes recs into the guest's input buffer as one batch, with
// the field table when the instance declared fields, and returns where.
func (i *Instance) writeBatch(recs []abi.Record) (ptr, size uint32, err error) {
	n := 0
	if i.fields != nil {
		n = i.fields.EncodedSize(recs)
	} else {
		n = abi.EncodedSize(recs)
	}
	ptr, err = i.buffer(n, "batch")
	if err != nil {
		return 0, 0, err
	}
	// Encode straight into guest memory: the view is read here because
	// eddy_alloc (or any earlier call) may have grown, and so moved, it.
	view, _ := i.mem.Read(ptr, uint32(n)) // in bounds: buffer checked it
	if i.fields != nil {
		i.fields.EncodeBatch(view, recs)
	} else {
		abi.EncodeBatch(view, recs)
	}
	return ptr, uint32(n), nil
}
