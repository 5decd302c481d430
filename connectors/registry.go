package connectors

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/eddy-stream/eddy/connectors/kafka"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

// ErrBadSpec marks every error about a source or sink spec that cannot be
// built (no connector or several set, a field out of range), as opposed to
// failures while running.
var ErrBadSpec = errors.New("connectors: bad spec")

// ErrBadPosition marks a source position (stream.Checkpointed) that the
// source did not write: damaged checkpoint data.
var ErrBadPosition = errors.New("connectors: bad source position")

// errNotOpen is a caller's bug: Next or Write before Open or after Close.
var errNotOpen = errors.New("connectors: not open")

// Registry builds sources and sinks from their specs. dataflow calls it once
// per parallel instance. The zero value is ready to use.
type Registry struct {
	// Stdout is where stdout sinks write; nil means os.Stdout.
	Stdout io.Writer
}

// NewSource builds one parallel instance of the source described by spec.
// Relative paths are resolved against baseDir, the job spec's directory.
func (r Registry) NewSource(spec *jobspec.SourceSpec, baseDir string) (stream.Source, error) {
	kind, err := sourceKind(spec)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "generator":
		cfg, err := newGeneratorConfig(spec.Generator)
		if err != nil {
			return nil, fmt.Errorf("generator source: %w", err)
		}
		return newGenerator(cfg), nil
	case "kafka":
		cfg, err := kafka.ConfigFromSpec(spec.Kafka)
		if err != nil {
			return nil, fmt.Errorf("kafka source: %w: %v", ErrBadSpec, err)
		}
		return kafka.NewSource(cfg)
	default: // "file"
		if spec.File.Path == "" {
			return nil, fmt.Errorf("file source: %w: path is empty", ErrBadSpec)
		}
		return &fileSource{
			path:     resolvePath(baseDir, spec.File.Path),
			keyField: spec.File.KeyField,
			tsField:  spec.File.TimestampField,
		}, nil
	}
}

// NewSink builds one parallel instance of the sink described by spec.
// Relative paths are resolved against baseDir, the job spec's directory.
func (r Registry) NewSink(spec *jobspec.SinkSpec, baseDir string) (stream.Sink, error) {
	kind, err := sinkKind(spec)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "file":
		if spec.File.Path == "" {
			return nil, fmt.Errorf("file sink: %w: path is empty", ErrBadSpec)
		}
		return &fileSink{path: resolvePath(baseDir, spec.File.Path)}, nil
	case "stdout":
		w := r.Stdout
		if w == nil {
			w = os.Stdout
		}
		return &stdoutSink{w: w, prefix: spec.Stdout.Prefix}, nil
	case "kafka":
		cfg, err := kafka.SinkConfigFromSpec(spec.Kafka)
		if err != nil {
			return nil, fmt.Errorf("kafka sink: %w: %v", ErrBadSpec, err)
		}
		return kafka.NewSink(cfg)
	default: // "discard"
		return &discardSink{}, nil
	}
}

// SourceBounded reports whether the source ends by itself: a file, or a
// generator with a count. It is false for a spec NewSource would refuse.
func (r Registry) SourceBounded(spec *jobspec.SourceSpec) bool {
	kind, err := sourceKind(spec)
	if err != nil {
		return false
	}
	switch kind {
	case "generator":
		return spec.Generator.Count > 0
	case "kafka":
		return spec.Kafka.StopAt != ""
	default:
		return true
	}
}

func sourceKind(spec *jobspec.SourceSpec) (string, error) {
	if spec == nil {
		return "", fmt.Errorf("source: %w: missing", ErrBadSpec)
	}
	var set []string
	if spec.Generator != nil {
		set = append(set, "generator")
	}
	if spec.File != nil {
		set = append(set, "file")
	}
	if spec.Kafka != nil {
		set = append(set, "kafka")
	}
	return exactlyOne("source", set, "generator, file, kafka")
}

func sinkKind(spec *jobspec.SinkSpec) (string, error) {
	if spec == nil {
		return "", fmt.Errorf("sink: %w: missing", ErrBadSpec)
	}
	var set []string
	if spec.File != nil {
		set = append(set, "file")
	}
	if spec.Stdout != nil {
		set = append(set, "stdout")
	}
	if spec.Discard != nil {
		set = append(set, "discard")
	}
	if spec.Kafka != nil {
		set = append(set, "kafka")
	}
	return exactlyOne("sink", set, "file, stdout, discard, kafka")
}

func exactlyOne(what string, set []string, known string) (string, error) {
	switch len(set) {
	case 1:
		return set[0], nil
	case 0:
		return "", fmt.Errorf("%s: %w: no connector set (want exactly one of %s)", what, ErrBadSpec, known)
	default:
		return "", fmt.Errorf("%s: %w: several connectors set (%s), want exactly one", what, ErrBadSpec, strings.Join(set, ", "))
	}
}

func resolvePath(baseDir, p string) string {
	if filepath.IsAbs(p) || baseDir == "" {
		return p
	}
	return filepath.Join(baseDir, p)
}

// subtaskOf checks info and returns its subtask and parallelism. A zero
// TaskInfo means subtask 0 of 1, so that tests and single-instance callers
// need not fill it in.
func subtaskOf(info stream.TaskInfo) (subtask, parallelism int, err error) {
	parallelism = info.Parallelism
	if parallelism == 0 {
		parallelism = 1
	}
	if parallelism < 0 || info.Subtask < 0 || info.Subtask >= parallelism {
		return 0, 0, fmt.Errorf("subtask %d of parallelism %d is out of range", info.Subtask, info.Parallelism)
	}
	return info.Subtask, parallelism, nil
}
