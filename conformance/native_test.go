package conformance

import (
	"cmp"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/udfs/counter/counting"
	"github.com/eddy-stream/eddy/udfs/project/projection"
	"github.com/eddy-stream/eddy/udfs/split/splitter"
)

// natives are the examples whose algorithm packages say the output of a
// vector directly, record by record: the hand-written expectations of
// their vectors are checked against them too, so that a vector is not
// wrong in the same way as the modules it passes. (The windowed and
// timer-driven examples are checked against two independent builds, Go
// and C, and their expectations were derived by hand.)
var natives = map[string]func(t *testing.T, v *Vector) ([]Record, error){
	"project": func(t *testing.T, v *Vector) ([]Record, error) {
		p, err := projection.Parse(config(v))
		if err != nil {
			return nil, err
		}
		var out []Record
		for _, r := range v.events() {
			if r.Record == nil {
				continue
			}
			if val, keep := p.Apply(nil, r.Record.Value); keep {
				out = append(out, record(r.Record.Key, val, r.Record.Timestamp))
			}
		}
		return out, nil
	},
	"split": func(t *testing.T, v *Vector) ([]Record, error) {
		s, err := splitter.Parse(config(v))
		if err != nil {
			return nil, err
		}
		var out []Record
		for _, r := range v.events() {
			if r.Record != nil {
				s.Split(r.Record.Value, func(key, value []byte) { out = append(out, record(key, value, r.Record.Timestamp)) })
			}
		}
		return out, nil
	},
	"counter": func(t *testing.T, v *Vector) ([]Record, error) {
		c, err := counting.ParseConfig(config(v))
		if err != nil {
			return nil, err
		}
		if v.KeyBy != jobspec.RecordKey {
			t.Skipf("keyed by %q: the key comes from the dataflow, not the algorithm", v.KeyBy)
		}
		counts := map[string]uint64{}
		// With idle_ms: each key's deadline in processing time, which
		// starts at 0 and moves only at the vector's advances.
		deadlines := map[string]int64{}
		var now int64
		var out []Record
		for _, e := range v.events() {
			switch {
			case e.Record != nil:
				k := string(e.Record.Key)
				counts[k]++
				if c.IdleMs > 0 {
					deadlines[k] = c.Deadline(now)
				}
				out = append(out, record(e.Record.Key, counting.AppendJSON(nil, e.Record.Key, counts[k]), e.Record.Timestamp))
			case e.ProcessingTime != nil && *e.ProcessingTime > now:
				now = *e.ProcessingTime
				var due []string
				for k, d := range deadlines {
					if d <= now {
						due = append(due, k)
					}
				}
				slices.SortFunc(due, func(a, b string) int {
					return cmp.Or(cmp.Compare(deadlines[a], deadlines[b]), strings.Compare(a, b))
				})
				for _, k := range due {
					delete(deadlines, k)
					out = append(out, record([]byte(k), counting.AppendIdleJSON(nil, []byte(k), counts[k]), abi.NoTimestamp))
				}
			}
		}
		return out, nil
	},
}

func config(v *Vector) []byte {
	if len(v.Config) == 0 {
		return []byte("{}")
	}
	return v.Config
}

func record(key, value []byte, ts int64) Record {
	r := Record{Key: string(key), Value: string(value)}
	if ts != abi.NoTimestamp {
		r.Timestamp = &ts
	}
	return r
}

func TestVectorsAgreeWithNative(t *testing.T) {
	for example, native := range natives {
		cases, err := filepath.Glob(filepath.Join(vectorDir, example, "*.json"))
		if err != nil || len(cases) == 0 {
			t.Fatalf("%s: no vectors (%v)", example, err)
		}
		for _, file := range cases {
			t.Run(example+"/"+strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
				v, err := Load(file)
				if err != nil {
					t.Fatal(err)
				}
				got, err := native(t, v)
				if v.Error != "" {
					if err == nil || !strings.Contains(err.Error(), v.Error) {
						t.Fatalf("native: %v; the vector expects an error with %q", err, v.Error)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if !sameRecords(got, v.Output) {
					t.Errorf("the native algorithm disagrees with the vector\n got: %s\nwant: %s", show(got), show(v.Output))
				}
			})
		}
	}
}
