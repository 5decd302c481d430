package jobspec

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const good = `name: words
parallelism: 2
nodes:
  - name: lines
    source: {file: {path: in.jsonl}}
  - name: split
    input: lines
    parallelism: 3
    wasm:
      module: ../udfs/build/split-c.wasm
      config: {field: text, lowercase: true}
  - name: out
    input: [split]
    sink: {file: {path: out.jsonl}}
`

func TestParseGood(t *testing.T) {
	s, err := Parse([]byte(good), "jobs/words.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Parallelism != 2 || s.MaxParallelism != DefaultMaxParallelism || s.BatchSize != DefaultBatchSize || s.BufferTimeout.D() != DefaultBufferTimeout {
		t.Fatalf("defaults not applied: %+v", s)
	}
	split := s.Node("split")
	if split == nil || s.NodeParallelism(split) != 3 || split.Line != 6 || split.Wasm.Line != 10 {
		t.Fatalf("split node = %+v", split)
	}
	if got := split.Wasm.Config["field"]; got != "text" {
		t.Fatalf("config field = %v", got)
	}
	if got := s.Resolve(split.Wasm.Module); got != "udfs/build/split-c.wasm" {
		t.Fatalf("Resolve = %q", got)
	}
	if s.NodeParallelism(s.Node("out")) != 2 || len(s.Node("out").Input) != 1 {
		t.Fatalf("out node = %+v", s.Node("out"))
	}
}

func TestDuration(t *testing.T) {
	s, err := Parse([]byte("name: x\nbuffer_timeout: 250\nnodes:\n  - {name: g, source: {generator: {kind: sequence, interval: 1m30s}}}\n  - {name: o, input: g, sink: {stdout: {}}}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if s.BufferTimeout.D() != 250*time.Millisecond || s.Nodes[0].Source.Generator.Interval.D() != 90*time.Second {
		t.Fatalf("durations: %v %v", s.BufferTimeout.D(), s.Nodes[0].Source.Generator.Interval.D())
	}
}

// TestBufferTimeout: left out (or null) is the default, 0 is kept (no
// wait), a negative number of milliseconds is refused.
func TestBufferTimeout(t *testing.T) {
	tests := []struct {
		name, field string
		want        time.Duration
		err         string
	}{
		{"absent", "", DefaultBufferTimeout, ""},
		{"null", "buffer_timeout: ~\n", DefaultBufferTimeout, ""},
		{"zero", "buffer_timeout: 0\n", 0, ""},
		{"zero duration", "buffer_timeout: 0s\n", 0, ""},
		{"five ms", "buffer_timeout: 5ms\n", 5 * time.Millisecond, ""},
		{"negative ms", "buffer_timeout: -1\n", 0, "job spec: buffer_timeout must not be negative (0 sends every batch at once; leave it out for 100ms)"},
		{"negative duration", "buffer_timeout: -5ms\n", 0, `"-5ms" is not a duration`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte("name: x\n"+tc.field+"nodes:\n  - {name: g, source: {generator: {kind: sequence}}}\n  - {name: o, input: g, sink: {stdout: {}}}\n"), "")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.BufferTimeout.D() != tc.want {
				t.Fatalf("buffer_timeout = %v, want %v", s.BufferTimeout.D(), tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		spec string
		want string
	}{
		{"typo in node field", strings.Replace(good, "    source:", "    sourc:", 1), `job.yaml:5: unknown field "sourc" in node "lines" (did you mean "source"?)`},
		{"typo in top level", strings.Replace(good, "parallelism: 2", "paralelism: 2", 1), `job.yaml:2: unknown field "paralelism" in the job (did you mean "parallelism"?)`},
		{"typo in connector", strings.Replace(good, "{file: {path: in.jsonl}}", "{file: {pth: in.jsonl}}", 1), `job.yaml:5: unknown field "pth" in node "lines".source.file (did you mean "path"?)`},
		{"unknown connector", strings.Replace(good, "{file: {path: in.jsonl}}", "{pulsar: {}}", 1), `job.yaml:5: unknown field "pulsar" in node "lines".source (known: file, generator, kafka)`},
		{"kafka without brokers", strings.Replace(good, "{file: {path: in.jsonl}}", "{kafka: {topics: [t]}}", 1), `node "lines": source.kafka: needs brokers`},
		{"kafka without topics", strings.Replace(good, "{file: {path: in.jsonl}}", "{kafka: {brokers: [\"h:1\"]}}", 1), `node "lines": source.kafka: needs topics or topic_pattern`},
		{"kafka topics and pattern", strings.Replace(good, "{file: {path: in.jsonl}}", "{kafka: {brokers: [\"h:1\"], topics: [t], topic_pattern: 't.*'}}", 1), `topics and topic_pattern are exclusive`},
		{"kafka bad pattern", strings.Replace(good, "{file: {path: in.jsonl}}", "{kafka: {brokers: [\"h:1\"], topic_pattern: 't('}}", 1), `source.kafka: topic_pattern: error parsing regexp`},
		{"kafka timestamp missing", strings.Replace(good, "{file: {path: in.jsonl}}", "{kafka: {brokers: [\"h:1\"], topics: [t], start: timestamp}}", 1), `start: timestamp needs start_timestamp`},
		{"kafka timestamp bad", strings.Replace(good, "{file: {path: in.jsonl}}", "{kafka: {brokers: [\"h:1\"], topics: [t], start: timestamp, start_timestamp: yesterday}}", 1), `start_timestamp "yesterday" is neither RFC 3339 nor milliseconds`},
		{"kafka negative discovery", strings.Replace(good, "{file: {path: in.jsonl}}", "{kafka: {brokers: [\"h:1\"], topics: [t], discovery_interval: -1s}}", 1), `"-1s" is not a duration`},
		{"kafka bad isolation", strings.Replace(good, "{file: {path: in.jsonl}}", "{kafka: {brokers: [\"h:1\"], topics: [t], isolation: dirty}}", 1), `source.kafka: isolation "dirty" (want read_committed or read_uncommitted)`},
		{"kafka bad sasl", strings.Replace(good, "{file: {path: in.jsonl}}", "{kafka: {brokers: [\"h:1\"], topics: [t], sasl: {mechanism: GSSAPI, username: u, password_env: P}}}", 1), `source.kafka: sasl.mechanism "GSSAPI" (want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)`},
		{"kafka sink sasl without password", strings.Replace(good, "{file: {path: out.jsonl}}", "{kafka: {brokers: [\"h:1\"], topic: t, sasl: {mechanism: PLAIN, username: u}}}", 1), `sink.kafka: sasl needs password_env`},
		{"kafka tls typo", strings.Replace(good, "{file: {path: in.jsonl}}", "{kafka: {brokers: [\"h:1\"], topics: [t], tls: {ca: x}}}", 1), `unknown field "ca"`},
		{"kafka bad stop_at", strings.Replace(good, "{file: {path: in.jsonl}}", "{kafka: {brokers: [\"h:1\"], topics: [t], stop_at: earliest}}", 1), `source.kafka: stop_at "earliest" (want latest, or nothing for an unbounded source)`},
		{"kafka group missing", strings.Replace(good, "{file: {path: in.jsonl}}", "{kafka: {brokers: [\"h:1\"], topics: [t], start: group}}", 1), `start: group needs a group`},
		{"kafka sink no topic", strings.Replace(good, "{file: {path: out.jsonl}}", "{kafka: {brokers: [\"h:1\"]}}", 1), `node "out": sink.kafka: needs a topic`},
		{"kafka sink bad delivery", strings.Replace(good, "{file: {path: out.jsonl}}", "{kafka: {brokers: [\"h:1\"], topic: t, delivery: twice}}", 1), `sink.kafka: delivery "twice" (want at_least_once or exactly_once)`},
		{"kafka sink eos without checkpoints", strings.Replace(good, "{file: {path: out.jsonl}}", "{kafka: {brokers: [\"h:1\"], topic: t, delivery: exactly_once}}", 1), `sink.kafka: delivery exactly_once needs a checkpoint section`},
		{"kafka bad start", strings.Replace(good, "{file: {path: in.jsonl}}", "{kafka: {brokers: [\"h:1\"], topics: [t], start: middle}}", 1), `source.kafka: start "middle" (want earliest, latest, timestamp or group)`},
		{"wrong type", strings.Replace(good, "parallelism: 3", "parallelism: three", 1), "job.yaml:8: cannot unmarshal !!str `three` into int"},
		{"bad duration", "name: x\nbuffer_timeout: soon\nnodes: []\n", `job.yaml:2: "soon" is not a duration`},
		{"unknown input", strings.Replace(good, "input: lines", "input: line", 1), `job.yaml:6: node "split": input "line" is not a node of this job (did you mean "lines"?)`},
		{"duplicate name", strings.Replace(good, "name: out", "name: split", 1), `node name "split" is already used on line 6`},
		{"two kinds", strings.Replace(good, "    sink: {file: {path: out.jsonl}}", "    sink: {file: {path: out.jsonl}}\n    wasm: {module: x.wasm}", 1), `node "out" must have exactly one of source, wasm, window, join or sink (it has 2)`},
		{"dangling", strings.Replace(good, "input: [split]", "input: [lines]", 1), `node "split": its output goes nowhere`},
		{"no name", strings.Replace(good, "name: words\n", "", 1), "the job has no name"},
		{"no nodes", "name: x\n", "the job has no nodes"},
		{"cycle", "name: x\nnodes:\n  - {name: a, input: b, wasm: {module: m.wasm}}\n  - {name: b, input: a, wasm: {module: m.wasm}}\n  - {name: o, input: a, sink: {stdout: {}}}\n", "is part of a cycle"},
		{"source with input", strings.Replace(good, "    source:", "    input: out\n    source:", 1), "a source has no input"},
		{"not yaml", "name: [x\n", "job.yaml:1:"},
		{"nodes not a list", "name: x\nnodes: {a: 1}\n", "job.yaml:2: nodes must be a list, not a mapping"},
		{"parallelism above max", strings.Replace(good, "parallelism: 2", "parallelism: 2\nmax_parallelism: 2", 1), `parallelism 3 is above max_parallelism 2`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.spec), "job.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not match ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q\nwant it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("name: x\nnodes: []\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b, "fuzz.yaml")
		if err != nil {
			return
		}
		// A spec that validates has a consistent graph.
		for i := range s.Nodes {
			for _, in := range s.Nodes[i].Input {
				if s.Node(in) == nil {
					t.Fatalf("accepted unknown input %q", in)
				}
			}
		}
	})
}
