package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEddyTest runs the built binary's `eddy test` on the committed
// fixtures: output (compared exactly, none when stdout is ""), --expect,
// --events, failures and the guest's log lines.
func TestEddyTest(t *testing.T) {
	root := repoRoot(t)
	fixture := func(name string) string { return filepath.Join(root, "udfs", "build", name+".wasm") }
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	users := write("users.jsonl", "{\"user\":\"u1\",\"ts\":1000}\n{\"user\":\"u2\",\"ts\":2000}\n\n{\"user\":\"u1\",\"ts\":3000}\n")
	counted := `{"key":"u1","value":{"key":"u1","count":1},"timestamp":1000}
{"key":"u2","value":{"key":"u2","count":1},"timestamp":2000}
{"key":"u1","value":{"key":"u1","count":2},"timestamp":3000}
`
	// Spacing in an expected file does not count.
	good := write("good.jsonl", strings.ReplaceAll(counted, `"count":`, `"count": `))
	bad := write("bad.jsonl", strings.Replace(counted, `"count":2`, `"count":3`, 1))
	txns := `{"card":"c1","amount":10.5,"country":"DE","ts":1000}
{"card":"c1","amount":40,"country":"FR","ts":2000}
{"card":"c1","amount":1,"country":"FR","ts":70000}
{"card":"c1","amount":99,"country":"PL","ts":500}
`
	for _, tc := range []struct {
		name       string
		args       []string
		stdin      string
		code       int
		stdout     string   // exact
		stderrHas  []string // each must appear
		stderrLine bool     // stderr is one line
	}{
		{
			name: "keyed counter", args: []string{fixture("counter-c"), "--input", users, "--key-by", "user", "--event-time", "ts", "--cache-dir", ""},
			stdout: counted,
		},
		{
			name: "flags before the module, input on stdin", args: []string{"--key-by", "user", "--event-time", "ts", "--cache-dir", "", fixture("counter-go")},
			stdin: "{\"user\":\"u1\",\"ts\":1000}\n{\"user\":\"u2\",\"ts\":2000}\n{\"user\":\"u1\",\"ts\":3000}\n", stdout: counted,
		},
		{
			name: "expect matches", args: []string{fixture("counter-c"), "--input", users, "--key-by", "user", "--event-time", "ts", "--expect", good, "--cache-dir", ""},
			stdout: counted, stderrHas: []string{"ok: 3 records as expected"},
		},
		{
			name: "expect differs", args: []string{fixture("counter-c"), "--input", users, "--key-by", "user", "--event-time", "ts", "--expect", bad, "--cache-dir", ""},
			code: 1, stdout: counted,
			stderrHas: []string{
				"--- " + bad + " (expected)",
				` {"key":"u1","value":{"key":"u1","count":1},"timestamp":1000}`,
				`-{"key":"u1","value":{"key":"u1","count":3},"timestamp":3000}`,
				`+{"key":"u1","value":{"key":"u1","count":2},"timestamp":3000}`,
				"eddy: the output differs from " + bad,
			},
		},
		{
			// The watermark (max ts − 1s − 1) closes the first minute
			// before the record at 500 arrives: it is late and dropped.
			name: "aggregate in a window, late record", args: []string{fixture("card-stats-go"), "--key-by", "card", "--event-time", "ts", "--max-out-of-orderness", "1s", "--window", "tumbling 1m", "--cache-dir", ""},
			stdin: txns,
			stdout: `{"key":"c1","value":{"key":"c1","window_start":0,"window_end":60000,"result":{"n":2,"total":"50.50","max":"40.00","countries":2}},"timestamp":59999}
{"key":"c1","value":{"key":"c1","window_start":60000,"window_end":120000,"result":{"n":1,"total":"1.00","max":"1.00","countries":1}},"timestamp":119999}
`,
		},
		{
			// Without out-of-orderness the record at 500 is late too.
			name: "window function", args: []string{fixture("top-n-c"), "--key-by", "card", "--event-time", "ts", "--window", "tumbling 1m", "--config", `{"n":1}`, "--cache-dir", ""},
			stdin: txns,
			stdout: `{"key":"c1","value":{"key":"c1","window_start":0,"window_end":60000,"rank":1,"value":{"card":"c1","amount":40,"country":"FR","ts":2000}},"timestamp":59999}
{"key":"c1","value":{"key":"c1","window_start":60000,"window_end":120000,"rank":1,"value":{"card":"c1","amount":1,"country":"FR","ts":70000}},"timestamp":119999}
`,
		},
		{
			name: "bad config is the job's one line", args: []string{fixture("counter-c"), "--input", users, "--key-by", "user", "--config", `{"x":1}`, "--cache-dir", ""},
			code: 1, stdout: "", stderrLine: true,
			stderrHas: []string{`eddy: job eddy-test failed: `, `eddy_open failed: counter: config: unknown key "x"`},
		},
		{
			name: "a trap is the job's one line", args: []string{fixture("counter-trap-c"), "--input", users, "--key-by", "user", "--cache-dir", ""},
			code: 1, stdout: "", stderrLine: true,
			stderrHas: []string{`eddy: job eddy-test failed: `, `counter-trap: refusing record`},
		},
		{
			name: "guest log lines", args: []string{filepath.Join(root, "host", "testdata", "echo.wasm"), "--config", `{"z":2}`, "--cache-dir", ""},
			stdin: "{\"a\":1}\n", stdout: "{\"value\":{\"a\":1}}\n{\"key\":\"eddy.echo.count\",\"value\":1}\n",
			stderrHas: []string{`[guest log] echo opened with config {"z":2}`},
		},
		{
			name: "aggregate without a window", args: []string{fixture("card-stats-c"), "--cache-dir", ""}, stdin: txns,
			code: 1, stderrLine: true, stderrHas: []string{"is an aggregate: it runs only in a window (add --window"},
		},
		{
			name: "bad window", args: []string{fixture("top-n-c"), "--key-by", "card", "--window", "hopping 1m", "--cache-dir", ""},
			code: 1, stderrLine: true, stderrHas: []string{`window "hopping 1m": want 'tumbling SIZE'`},
		},
		{
			// The watermark at 5000 fires c1's cleanup timer (1000 + 1000)
			// before the late FR record: no alert; without it, one.
			name: "explicit watermark", args: []string{fixture("country-change-go"), "--events", "--key-by", "record_key", "--config", `{"window_ms":1000}`, "--cache-dir", ""},
			stdin: `{"key":"c1","value":{"card":"c1","country":"DE"},"timestamp":1000}
{"watermark":5000}
{"key":"c1","value":"{\"card\":\"c1\",\"country\":\"FR\"}","timestamp":1500}
`,
			stdout: "",
		},
		{
			name: "no watermark", args: []string{fixture("country-change-go"), "--events", "--key-by", "record_key", "--config", `{"window_ms":1000}`, "--cache-dir", ""},
			stdin: `{"key":"c1","value":{"card":"c1","country":"DE"},"timestamp":1000}
{"key":"c1","value":"{\"card\":\"c1\",\"country\":\"FR\"}","timestamp":1500}
`,
			stdout: `{"key":"c1","value":{"card":"c1","from":"DE","to":"FR","gap_ms":500,"ts":1500},"timestamp":1500}` + "\n",
		},
		{
			name: "bad event line", args: []string{fixture("project-c"), "--events", "--cache-dir", ""}, stdin: "{\"value\":1}\n{\"watermark\":1,\"key\":\"k\"}\n",
			code: 1, stderrLine: true, stderrHas: []string{"input stdin:2: a watermark or processing_time event has no other field"},
		},
		{
			// Processing time starts at 0 and moves only at the script's
			// advances: a's deadline is 1000, then 1600 after its second
			// record; the advance to 1600 reports it idle, and b's deadline
			// (2100) is still pending at the end of input.
			name: "processing time", args: []string{fixture("counter-rust"), "--events", "--key-by", "record_key", "--config", `{"idle_ms":1000}`, "--cache-dir", ""},
			stdin: `{"key":"a","value":"x","timestamp":1}
{"processing_time":600}
{"key":"a","value":"x","timestamp":2}
{"processing_time":1100}
{"key":"b","value":"x","timestamp":3}
{"processing_time":1600}
`,
			stdout: `{"key":"a","value":{"key":"a","count":1},"timestamp":1}
{"key":"a","value":{"key":"a","count":2},"timestamp":2}
{"key":"b","value":{"key":"b","count":1},"timestamp":3}
{"key":"a","value":{"key":"a","count":2,"idle":true}}
`,
		},
		{
			name: "two kinds in one event", args: []string{fixture("project-c"), "--events", "--cache-dir", ""}, stdin: "{\"watermark\":1,\"processing_time\":1}\n",
			code: 1, stderrLine: true, stderrHas: []string{"input stdin:1: a watermark or processing_time event has no other field"},
		},
		{
			// A two-input module sees the events in the file's order: each
			// record joins what the other input had before it; a watermark
			// of one input alone does not move the module's (the lower of
			// the two), a watermark without an input moves both.
			name: "two inputs", args: []string{fixture("regular-join-c"), "--events", "--key-by", "record_key", "--config", `{"report_at":1000}`, "--cache-dir", ""},
			stdin: `{"key":"a","value":{"p":1},"timestamp":1,"input":0}
{"key":"a","value":{"x":1},"timestamp":2,"input":1}
{"key":"a","value":{"p":2},"timestamp":3}
{"watermark":2000,"input":0}
{"key":"a","value":{"x":2},"timestamp":4,"input":1}
{"watermark":2000}
{"key":"b","value":{"x":3},"timestamp":5,"input":1}
`,
			stdout: `{"key":"a","value":{"left":{"p":1},"right":{"x":1}},"timestamp":2}
{"key":"a","value":{"left":{"p":2},"right":{"x":1}},"timestamp":3}
{"key":"a","value":{"left":{"p":1},"right":{"x":2}},"timestamp":4}
{"key":"a","value":{"left":{"p":2},"right":{"x":2}},"timestamp":4}
{"key":"a","value":{"key":"a","left":2,"right":2},"timestamp":1000}
{"key":"b","value":{"key":"b","left":0,"right":1},"timestamp":1000}
`,
		},
		{
			// A key field per input: l of input 0's records, r of input 1's.
			name: "two inputs, a key each", args: []string{fixture("regular-join-go"), "--events", "--key-by", "l,r", "--cache-dir", ""},
			stdin: `{"value":{"l":"a"},"input":0}
{"value":{"l":"b"},"input":0}
{"value":{"r":"b"},"input":1}
`,
			stdout: `{"key":"b","value":{"left":{"l":"b"},"right":{"r":"b"}}}
`,
		},
		{
			name: "two inputs without events", args: []string{fixture("regular-join-go"), "--key-by", "card", "--cache-dir", ""}, stdin: "{\"card\":\"a\"}\n",
			code: 2, stderrHas: []string{"is a two-input operator: give it --events"},
		},
		{
			name: "two inputs without a key", args: []string{fixture("regular-join-go"), "--events", "--cache-dir", ""}, stdin: "{\"value\":1}\n",
			code: 1, stderrLine: true, stderrHas: []string{"is a two-input operator: it runs keyed, add --key-by FIELD"},
		},
		{
			name: "input 2", args: []string{fixture("regular-join-go"), "--events", "--key-by", "card", "--cache-dir", ""}, stdin: "{\"value\":1,\"input\":2}\n",
			code: 1, stderrLine: true, stderrHas: []string{`input stdin:1: "input": 2: an input is 0 or 1`},
		},
		{
			name: "input 1 of a one-input module", args: []string{fixture("project-c"), "--events", "--cache-dir", ""}, stdin: "{\"value\":1,\"input\":1}\n",
			code: 1, stderrLine: true, stderrHas: []string{`an event names "input": 1, but the module is a one-input operator`},
		},
		{
			name: "processing time of an input", args: []string{fixture("regular-join-go"), "--events", "--key-by", "card", "--cache-dir", ""}, stdin: "{\"processing_time\":1,\"input\":1}\n",
			code: 1, stderrLine: true, stderrHas: []string{`input stdin:1: a processing_time event names no input`},
		},
		{name: "no module", args: []string{"--key-by", "x"}, code: 2, stderrHas: []string{"which module?"}},
		{name: "missing input", args: []string{fixture("project-c"), "--input", filepath.Join(dir, "nope.jsonl")}, code: 1, stderrHas: []string{"input: open"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(eddyBin, append([]string{"test"}, tc.args...)...)
			cmd.Stdin = strings.NewReader(tc.stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout.String(), stderr.String())
			}
			if got := stdout.String(); got != tc.stdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", got, tc.stdout)
			}
			for _, want := range tc.stderrHas {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
				}
			}
			if tc.stderrLine && strings.Count(stderr.String(), "\n") != 1 {
				t.Errorf("stderr is not one line:\n%s", stderr.String())
			}
		})
	}
}

// FuzzTestInputLine: an input line of --events and a line of an --expect
// file are read from the user: any bytes give an event or a one-line
// error, never a panic, and a normalized expected line normalizes to
// itself.
func FuzzTestInputLine(f *testing.F) {
	for _, s := range []string{
		`{"key":"c1","value":{"a":1},"timestamp":1000}`, `{"watermark":5}`, `{"value":"text"}`,
		`{"value":null}`, `{"watermark":1,"key":"k"}`, `{"key":1}`, `[]`, `{"value":{"a":1}} x`,
		`{"processing_time":7}`, `{"processing_time":7,"watermark":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if e, err := parseTestEvent(line); err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
		} else if n := btoi(e.Record != nil) + btoi(e.Watermark != nil) + btoi(e.ProcessingTime != nil); n != 1 {
			t.Fatalf("%q: event %+v is not exactly one of a record, a watermark and a processing-time advance", line, e)
		}
		n, err := normalizeLine(line)
		if err != nil {
			return
		}
		again, err := normalizeLine([]byte(n))
		if err != nil || again != n {
			t.Fatalf("%q normalizes to %q, which normalizes to %q, %v", line, n, again, err)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
