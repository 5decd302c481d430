package conformance

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/dataflow/localrun"
	"github.com/eddy-stream/eddy/host"
)

// examples maps each example's vector directory to its fixture name in
// udfs/build.
var examples = map[string]string{
	"project":       "project",
	"split":         "split",
	"counter":       "counter",
	"countrychange": "country-change",
	"card-stats":    "card-stats",
	"top-n":         "top-n",
	"regularjoin":   "regular-join",
}

// languages are every SDK's; a fixture that is not built yet is skipped by
// name, so the suite is ready for a language before its SDK lands.
var languages = []string{"go", "c", "rust", "as"}

const vectorDir = "../testdata/conformance"

// fixtureDir holds the builds; EDDY_CONFORMANCE_BUILD points the suite at
// another directory (an SDK's work in progress, before its fixtures are
// committed).
var fixtureDir = cmp.Or(os.Getenv("EDDY_CONFORMANCE_BUILD"), "../udfs/build")

func TestConformance(t *testing.T) {
	ctx := context.Background()
	cfg := host.DefaultConfig()
	cfg.CacheDir = ""
	engine, err := host.NewEngine(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close(ctx) })

	dirs, err := os.ReadDir(vectorDir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		example := d.Name()
		fixture, ok := examples[example]
		if !ok {
			t.Errorf("%s/%s: not an example this suite knows", vectorDir, example)
			continue
		}
		seen[example] = true
		cases, err := filepath.Glob(filepath.Join(vectorDir, example, "*.json"))
		if err != nil || len(cases) == 0 {
			t.Errorf("%s: no vectors (%v)", example, err)
			continue
		}
		slices.Sort(cases)
		t.Run(example, func(t *testing.T) {
			for _, lang := range languages {
				t.Run(lang, func(t *testing.T) {
					path := filepath.Join(fixtureDir, fixture+"-"+lang+".wasm")
					if _, err := os.Stat(path); err != nil {
						t.Skipf("%s: no %s build yet (%s)", example, lang, path)
					}
					mod, err := engine.Load(ctx, path)
					if err != nil {
						t.Fatal(err)
					}
					for _, file := range cases {
						name := strings.TrimSuffix(filepath.Base(file), ".json")
						t.Run(name, func(t *testing.T) { runCase(t, mod, file) })
					}
				})
			}
		})
	}
	for example := range examples {
		if !seen[example] {
			t.Errorf("example %s has no vectors under %s", example, vectorDir)
		}
	}
}

func runCase(t *testing.T, mod *host.Module, file string) {
	if err := checkCase(mod, file); err != nil {
		t.Fatal(err)
	}
}

// checkCase runs one vector and says how the module's behaviour differs
// from it (nil: it conforms).
func checkCase(mod *host.Module, file string) error {
	v, err := Load(file)
	if err != nil {
		return err
	}
	c, err := v.config()
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	c.Module = mod
	out, err := localrun.Run(context.Background(), c, v.events())
	if v.Error != "" {
		switch {
		case err == nil:
			return fmt.Errorf("%s: the run succeeded; want an error containing %q", file, v.Error)
		case !strings.Contains(err.Error(), v.Error):
			return fmt.Errorf("%s: error\n  %v\nwant it to contain\n  %q", file, err, v.Error)
		case strings.Contains(err.Error(), "\n"):
			return fmt.Errorf("%s: the error is not one line: %q", file, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if got := records(out); !sameRecords(got, v.Output) {
		return fmt.Errorf("%s: output differs\n got: %s\nwant: %s", file, show(got), show(v.Output))
	}
	return nil
}

// TestConformanceCatchesDeviations checks the checker: modules that
// behave differently from the counter (the hot-swap test variants) fail
// its vectors, each with a message that says how.
func TestConformanceCatchesDeviations(t *testing.T) {
	ctx := context.Background()
	cfg := host.DefaultConfig()
	cfg.CacheDir = ""
	engine, err := host.NewEngine(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close(ctx) })
	counts := filepath.Join(vectorDir, "counter", "counts.json")
	for _, tc := range []struct{ fixture, want string }{
		{"counter-plus-c", "output differs"}, // another value
		{"counter-trap-c", "counter-trap"},   // a failure of the job
		{"project-c", "output differs"},      // another operator
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			mod, err := engine.Load(ctx, filepath.Join(fixtureDir, tc.fixture+".wasm"))
			if err != nil {
				t.Fatal(err)
			}
			err = checkCase(mod, counts)
			if err == nil {
				t.Fatalf("%s passes %s", tc.fixture, counts)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: %v\nwant it to say %q", tc.fixture, err, tc.want)
			}
		})
	}
}

func show(rs []Record) string {
	var b strings.Builder
	for _, r := range rs {
		j, _ := json.Marshal(r)
		b.WriteString("\n  ")
		b.Write(j)
	}
	if len(rs) == 0 {
		b.WriteString("(none)")
	}
	return b.String()
}
