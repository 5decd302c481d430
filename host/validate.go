package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero/api"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/host/internal/interrupt"
)

// wasmMagic starts every Wasm binary; checked first so that a wrong file
// (a Go binary, a .wat text, a truncated upload) gets a plain answer rather
// than a decoder message.
var wasmMagic = []byte{0x00, 'a', 's', 'm'}

func checkMagic(wasm []byte) error {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], wasmMagic) {
		return errors.New("not a WebAssembly binary (no \\0asm header)")
	}
	return nil
}

// validate checks the compiled module against the ABI and, when its shape
// is right, reads its declared ABI version from a probe instance. Shape
// problems are all reported, in one line, so a module author fixes them in
// one round.
func (m *Module) validate(ctx context.Context) error {
	var problems []string
	problems = append(problems, m.checkExports()...)
	problems = append(problems, m.checkImports()...)
	problems = append(problems, m.checkTimerExport()...)
	if len(problems) > 0 {
		return markf([]error{ErrInvalidModule}, "module %s: %s", m.name, strings.Join(problems, "; "))
	}
	if err := m.probe(ctx); err != nil {
		return err
	}
	// Which imports are allowed depends on the version the probe read.
	if err := m.checkImportVersions(); err != nil {
		return err
	}
	if err := m.checkTwoInput(); err != nil {
		return err
	}
	return m.checkAggregate()
}

func (m *Module) checkExports() []string {
	var problems []string
	funcs := m.compiled.ExportedFunctions()
	// A module exporting any of the aggregate functions is an aggregate
	// module: it must export all of them, and eddy_process is optional.
	for name := range abi.AggregateExports {
		if _, ok := funcs[name]; ok {
			m.aggregate = true
		}
	}
	required := abi.RequiredExports
	if m.aggregate {
		required = maps.Clone(abi.RequiredExports)
		delete(required, abi.ExportProcess)
		maps.Copy(required, abi.AggregateExports)
	}
	for _, name := range sortedKeys(required) {
		want := abiSig(required[name])
		def, ok := funcs[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("missing export %q (want %s)", name, want))
			continue
		}
		if got := defSig(def); !got.equal(want) {
			problems = append(problems, fmt.Sprintf("export %q has signature %s, want %s", name, got, want))
		}
	}
	optional := abi.OptionalExports
	if m.aggregate {
		optional = maps.Clone(optional)
		optional[abi.ExportProcess] = abi.RequiredExports[abi.ExportProcess]
	}
	for _, name := range sortedKeys(optional) {
		def, ok := funcs[name]
		if !ok {
			continue
		}
		if want, got := abiSig(optional[name]), defSig(def); !got.equal(want) {
			problems = append(problems, fmt.Sprintf("export %q has signature %s, want %s", name, got, want))
		}
		switch name {
		case abi.ExportInitialize:
			m.hasInitialize = true
		case abi.ExportProcess2:
			m.twoInput = true
		}
	}

	// wazero validated the start function's type (func()) on the
	// original module.
	_, m.hasStart = funcs[interrupt.StartExportName]

	mem, ok := m.compiled.ExportedMemories()[abi.ExportMemory]
	if !ok {
		problems = append(problems, fmt.Sprintf("no exported memory %q (every pointer refers to it)", abi.ExportMemory))
	} else {
		limit := m.engine.cfg.memoryLimitPages()
		if max, encoded := mem.Max(); encoded && max < limit {
			limit = max
		}
		m.memoryLimit = uint64(limit) * wasmPageSize
	}
	return problems
}

func (m *Module) checkImports() []string {
	var problems []string
	for _, mem := range m.compiled.ImportedMemories() {
		mod, name, _ := mem.Import()
		problems = append(problems, fmt.Sprintf("imports memory %q.%q; an operator must define its own", mod, name))
	}
	for _, def := range m.compiled.ImportedFunctions() {
		mod, name, _ := def.Import()
		got := defSig(def)
		switch mod {
		case abi.ImportModule:
			want, ok := abi.HostImports[name]
			if !ok {
				problems = append(problems, fmt.Sprintf("import %q.%q is not provided by this host (ABI version %d provides %s)",
					mod, name, abi.Version, strings.Join(sortedKeys(abi.HostImports), ", ")))
			} else if want := abiSig(want); !got.equal(want) {
				problems = append(problems, fmt.Sprintf("import %q.%q has signature %s, want %s", mod, name, got, want))
			}
		case abi.WASIModule:
			wdef, ok := m.engine.wasi[name]
			if !ok {
				problems = append(problems, fmt.Sprintf("import %q.%q is not a WASI function this host provides", mod, name))
			} else if want := defSig(wdef); !got.equal(want) {
				problems = append(problems, fmt.Sprintf("import %q.%q has signature %s, want %s", mod, name, got, want))
			}
		default:
			problems = append(problems, fmt.Sprintf("import %q.%q is from an unknown module (only %q and %q are provided)",
				mod, name, abi.ImportModule, abi.WASIModule))
		}
	}
	return problems
}

// probe instantiates the module once, runs _initialize and reads
// eddy_abi_version, so a module built for another ABI version is refused at
// upload rather than when its first task starts. Whatever the probe trips
// over (a trap in _initialize, a start function that loops) also refuses
// the module.
func (m *Module) probe(ctx context.Context) error {
	inst, err := m.newInstance(ctx, InstanceConfig{noMetrics: true}, m.name+" (probe)", "module "+m.name+": probe instance")
	if err != nil {
		return mark(err, ErrInvalidModule)
	}
	defer inst.Close()
	version, err := inst.abiVersion()
	if err != nil {
		return mark(err, ErrInvalidModule)
	}
	if !slices.Contains(abi.SupportedVersions, version) {
		return markf([]error{ErrInvalidModule}, "module %s: ABI version %d is not supported by this host (supports %s)",
			m.name, version, joinVersions(abi.SupportedVersions))
	}
	m.abiVersion = version
	return nil
}

// signature is a function type in wazero's terms, comparable and printable.
type signature struct {
	params, results []api.ValueType
}

func defSig(def api.FunctionDefinition) signature {
	return signature{params: def.ParamTypes(), results: def.ResultTypes()}
}

// abiSig converts an ABI signature; abi and wazero both use the Wasm binary
// encoding of value types (0x7f i32, 0x7e i64), so each type converts as is.
func abiSig(s abi.Signature) signature {
	return signature{params: valueTypes(s.Params), results: valueTypes(s.Results)}
}

func valueTypes(ts []abi.ValType) []api.ValueType {
	out := make([]api.ValueType, len(ts))
	for i, t := range ts {
		out[i] = api.ValueType(t)
	}
	return out
}

func (s signature) equal(o signature) bool {
	return slices.Equal(s.params, o.params) && slices.Equal(s.results, o.results)
}

// String renders the signature as "func(i32, i32) -> i32".
func (s signature) String() string {
	out := "func(" + typeList(s.params) + ")"
	switch len(s.results) {
	case 0:
	case 1:
		out += " -> " + api.ValueTypeName(s.results[0])
	default:
		out += " -> (" + typeList(s.results) + ")"
	}
	return out
}

func typeList(ts []api.ValueType) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = api.ValueTypeName(t)
	}
	return strings.Join(names, ", ")
}

func joinVersions(vs []uint32) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
