package jobspec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// ErrInvalid marks every error about the content of a spec (errors.Is);
// the messages themselves are "file:line: what is wrong".
var ErrInvalid = errors.New("jobspec: invalid job spec")

type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

func invalidf(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

// Defaults applied to fields left out.
const (
	DefaultParallelism    = 1
	DefaultMaxParallelism = 128
	DefaultBatchSize      = 256
	DefaultBufferTimeout  = 100 * time.Millisecond
	MaxBatchSize          = 1 << 16
)

// Load reads and validates the spec at path.
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("job spec: %w", err)
	}
	return Parse(data, path)
}

// Parse decodes and validates a spec; file names it in errors and anchors
// relative paths ("" for none).
func Parse(data []byte, file string) (*Spec, error) {
	loc := file
	if loc == "" {
		loc = "job spec"
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlError(loc, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, invalidf("%s is empty", loc)
	}
	root := doc.Content[0]
	if err := checkFields(loc, root, reflect.TypeOf(Spec{}), "the job"); err != nil {
		return nil, err
	}
	// Set before decoding: a buffer_timeout left out (or null) keeps the
	// default, one written as 0 means no wait at all.
	s := Spec{BufferTimeout: Duration(DefaultBufferTimeout)}
	if err := root.Decode(&s); err != nil {
		return nil, yamlError(loc, err)
	}
	s.File = file
	if nodes := fieldValue(root, "nodes"); nodes != nil && nodes.Kind == yaml.SequenceNode {
		for i, n := range nodes.Content {
			if i < len(s.Nodes) {
				s.Nodes[i].Line = n.Line
				if w := fieldValue(n, "wasm"); w != nil && s.Nodes[i].Wasm != nil {
					s.Nodes[i].Wasm.Line = w.Line
				}
			}
		}
	}
	if err := s.validate(loc); err != nil {
		return nil, err
	}
	return &s, nil
}

// Dir is the directory relative paths in the spec are resolved against.
func (s *Spec) Dir() string {
	if s.File == "" {
		return "."
	}
	return filepath.Dir(s.File)
}

// Resolve makes a path from the spec absolute-or-relative to the spec file.
func (s *Spec) Resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(s.Dir(), p)
}

// Node returns the node named name, or nil.
func (s *Spec) Node(name string) *Node {
	for i := range s.Nodes {
		if s.Nodes[i].Name == name {
			return &s.Nodes[i]
		}
	}
	return nil
}

// NodeParallelism is the parallelism a node runs at.
func (s *Spec) NodeParallelism(n *Node) int {
	if n.Parallelism > 0 {
		return n.Parallelism
	}
	return s.Parallelism
}

var yamlLine = regexp.MustCompile(`line (\d+): `)

// yamlError turns yaml.v3's multi-line errors into "file:line: message".
func yamlError(loc string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	first := strings.TrimSpace(strings.SplitN(msg, "\n", 2)[0])
	if m := yamlLine.FindStringSubmatchIndex(first); m != nil {
		line := first[m[2]:m[3]]
		first = first[:m[0]] + first[m[1]:]
		return invalidf("%s:%s: %s", loc, line, first)
	}
	return invalidf("%s: %s", loc, first)
}

func errAt(loc string, line int, format string, args ...any) error {
	return invalidf("%s:%d: %s", loc, line, fmt.Sprintf(format, args...))
}

func fieldValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

var (
	durationType  = reflect.TypeOf(Duration(0))
	inputsType    = reflect.TypeOf(Inputs(nil))
	keysType      = reflect.TypeOf(KeyFields(nil))
	signedType    = reflect.TypeOf(SignedDuration(0))
	aggregateType = reflect.TypeOf(AggregateSpec{})
)

// checkFields walks n against t and reports the first key that t does not
// have, with its line and the closest known name. yaml.v3's KnownFields
// does the same check but its message names Go types, not spec fields.
func checkFields(loc string, n *yaml.Node, t reflect.Type, where string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch {
	case t == durationType || t == inputsType || t == signedType || t == keysType:
		return nil // their UnmarshalYAML reports their own errors
	case t == aggregateType && n.Kind != yaml.MappingNode:
		return nil // "count" or [count, sum(amount)]: checked by validate
	case t.Kind() == reflect.Struct:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return nil
		}
		if n.Kind != yaml.MappingNode {
			return errAt(loc, n.Line, "%s must be a mapping, not %s", where, describe(n))
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := fields[k.Value]
			if !ok {
				return errAt(loc, k.Line, "unknown field %q in %s%s", k.Value, where, suggest(k.Value, fields))
			}
			sub := fmt.Sprintf("%s.%s", where, k.Value)
			if where == "the job" {
				sub = k.Value
			}
			if err := checkFields(loc, v, f.Type, sub); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		if n.Kind != yaml.SequenceNode {
			return errAt(loc, n.Line, "%s must be a list, not %s", where, describe(n))
		}
		for i, e := range n.Content {
			label := fmt.Sprintf("%s[%d]", where, i)
			if name := fieldValue(e, "name"); name != nil && name.Kind == yaml.ScalarNode {
				label = fmt.Sprintf("node %q", name.Value)
			}
			if err := checkFields(loc, e, t.Elem(), label); err != nil {
				return err
			}
		}
	}
	return nil
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	default:
		return strconv.Quote(n.Value)
	}
}

func yamlFields(t reflect.Type) map[string]reflect.StructField {
	fields := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if name != "" && name != "-" {
			fields[name] = f
		}
	}
	return fields
}

func suggest(got string, fields map[string]reflect.StructField) string {
	best, bestD := "", 3
	for name := range fields {
		if d := editDistance(got, name); d < bestD || (d == bestD && name < best) {
			best, bestD = name, d
		}
	}
	if best == "" {
		names := make([]string, 0, len(fields))
		for name := range fields {
			names = append(names, name)
		}
		slices.Sort(names)
		return " (known: " + strings.Join(names, ", ") + ")"
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// UnmarshalYAML accepts "1m30s"-style strings or integer milliseconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a duration must be like \"10s\" or a number of milliseconds, not %s", n.Line, describe(n))
	}
	if ms, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
		*d = Duration(time.Duration(ms) * time.Millisecond)
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration (write e.g. \"500ms\", \"10s\", \"1m\")", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalYAML accepts what Duration does, with a leading minus sign.
func (d *SignedDuration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && strings.HasPrefix(n.Value, "-") {
		c := *n
		c.Value = n.Value[1:]
		var v Duration
		if err := v.UnmarshalYAML(&c); err != nil {
			return fmt.Errorf("line %d: %q is not a duration (write e.g. \"-5s\", \"10s\")", n.Line, n.Value)
		}
		*d = SignedDuration(-v)
		return nil
	}
	var v Duration
	if err := v.UnmarshalYAML(n); err != nil {
		return err
	}
	*d = SignedDuration(v)
	return nil
}

// UnmarshalYAML accepts one name or a list of names.
func (in *Inputs) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*in = Inputs{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(Inputs, 0, len(n.Content))
		for _, e := range n.Content {
			if e.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: input must name nodes, not %s", e.Line, describe(e))
			}
			out = append(out, e.Value)
		}
		*in = out
		return nil
	}
	return fmt.Errorf("line %d: input must be a node name or a list of names, not %s", n.Line, describe(n))
}

// UnmarshalYAML accepts one key field or a list of them, one per input.
func (k *KeyFields) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" || n.Value == "" {
			*k = nil
			return nil
		}
		*k = KeyFields{n.Value}
		return nil
	case yaml.SequenceNode:
		out := make(KeyFields, 0, len(n.Content))
		for _, e := range n.Content {
			if e.Kind != yaml.ScalarNode || e.Value == "" {
				return fmt.Errorf("line %d: key_by must name key fields, not %s", e.Line, describe(e))
			}
			out = append(out, e.Value)
		}
		*k = out
		return nil
	}
	return fmt.Errorf("line %d: key_by must be a key field or a list of them, one per input, not %s", n.Line, describe(n))
}

// UnmarshalYAML accepts "count", a list of built-ins, or a mapping with
// wasm or apply.
func (a *AggregateSpec) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		a.Builtins = []string{n.Value}
		return nil
	case yaml.SequenceNode:
		for _, e := range n.Content {
			if e.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: aggregate list entries are names like count or sum(amount), not %s", e.Line, describe(e))
			}
			a.Builtins = append(a.Builtins, e.Value)
		}
		return nil
	}
	type plain AggregateSpec
	return n.Decode((*plain)(a))
}
