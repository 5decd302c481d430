package host

// Version 5 (abi/ABI.md, "Version 5: two-input keyed operators"): a module
// that exports eddy_process2 takes the records of a node's two inputs,
// each batch with the index of its input, and shares one key space of
// keyed state and timers between them.

import (
	"fmt"

	"github.com/eddy-stream/eddy/abi"
)

// IsTwoInput reports whether the module is a two-input operator: it
// exports eddy_process2, and runs only on a node that names a key per
// input (key_by: [left, right]).
func (m *Module) IsTwoInput() bool { return m.twoInput }

// checkTwoInput refuses a module that exports eddy_process2 but declares a
// version before 5 (a host of that version would call eddy_process) or is
// an aggregate module.
func (m *Module) checkTwoInput() error {
	if !m.twoInput {
		return nil
	}
	if m.abiVersion < abi.TwoInputVersion {
		return markf([]error{ErrInvalidModule}, "module %s exports %s but declares ABI version %d; two-input modules declare version %d",
			m.name, abi.ExportProcess2, m.abiVersion, abi.TwoInputVersion)
	}
	if m.aggregate {
		return markf([]error{ErrInvalidModule}, "module %s exports both %s and the aggregate functions: it is either a two-input operator or an aggregate", m.name, abi.ExportProcess2)
	}
	return nil
}

// ProcessInput is Process for a two-input module: it writes recs, which
// came from input (0 for the node's first input, 1 for its second), as one
// batch and calls eddy_process2(input, ptr, len) once.
func (i *Instance) ProcessInput(input int, recs []abi.Record, emit func([]abi.Record)) error {
	if err := i.ready(abi.ExportProcess2); err != nil {
		return err
	}
	if i.fnProcess2 == nil {
		return fmt.Errorf("%s: module %s is a one-input operator (it does not export %s)", i.who, i.module.name, abi.ExportProcess2)
	}
	if input != 0 && input != 1 {
		return fmt.Errorf("%s: input %d: a two-input operator has inputs 0 and 1", i.who, input)
	}
	ptr, size, err := i.writeBatch(recs)
	if err != nil {
		return err
	}
	i.stack[0], i.stack[1], i.stack[2] = uint64(input), uint64(ptr), uint64(size)
	if err := i.call(abi.ExportProcess2, i.fnProcess2, emit); err != nil {
		return err
	}
	return i.status(abi.ExportProcess2)
}
