package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/storage"
)

// writeCheckpoint writes a checkpoint of two tasks under root, as tasks
// and the leader do: t0 with state files a and b, t1 with b and c (a
// shared file, as with a Pebble database shared by the tasks of a worker).
func writeCheckpoint(t *testing.T, st storage.Store, root string, id int64) *Manifest {
	t.Helper()
	m := &Manifest{Version: Version, Job: "j", Checkpoint: id, Tasks: map[string]string{}, MaxParallelism: 128}
	files := map[string][]string{"t0": {"a", "b"}, "t1": {"b", "c"}}
	for sub, task := range []string{"t0", "t1"} {
		var refs []StateFile
		for _, f := range files[task] {
			refs = append(refs, StateFile{Key: "shared/" + f, Size: int64(len(f)) + 10})
		}
		state, _ := json.Marshal(map[string]any{"format": 1, "kind": "pebble-sst", "files": refs})
		tm := TaskManifest{Version: Version, Checkpoint: id, Task: task, Subtask: sub, Parallelism: 2,
			Nodes: map[string]NodeSnapshot{"src": {}, "op": {State: state}}}
		data, _ := json.Marshal(&tm)
		key := TaskManifestKey(root, id, task)
		put(t, st, key, data)
		m.Tasks[task] = key
	}
	return m
}

func TestReadContents(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	root := JobRoot("default", "j")
	m := writeCheckpoint(t, st, root, 3)
	c, err := ReadContents(ctx, st, m)
	if err != nil {
		t.Fatal(err)
	}
	if c.Root != root || c.Manifest != m || len(c.Tasks) != 2 || c.Tasks[0].ID != "t0" || c.Tasks[1].Key != TaskManifestKey(root, 3, "t1") ||
		c.Tasks[1].Manifest.Subtask != 1 {
		t.Fatalf("contents %+v", c)
	}
	if got := fmt.Sprint(c.StateFiles); got != "[{shared/a 11} {shared/b 11} {shared/c 11}]" {
		t.Errorf("state files %s", got)
	}
	want := []string{root + "/chk/3/t0.json", root + "/chk/3/t1.json", root + "/shared/a", root + "/shared/b", root + "/shared/c"}
	if got := c.Keys(); !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q", got, want)
	}
	// A savepoint is a root of its own.
	sp := SavepointDir("default", "j", 4)
	c, err = ReadContents(ctx, st, writeCheckpoint(t, st, sp, 4))
	if err != nil || c.Root != sp || c.Keys()[2] != sp+"/shared/a" {
		t.Fatalf("savepoint contents %+v, %v", c, err)
	}
}

func TestReadContentsErrors(t *testing.T) {
	ctx := context.Background()
	root := JobRoot("default", "j")
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, st storage.Store, m *Manifest)
		is     error
		msg    string
	}{
		{name: "missing task manifest", is: storage.ErrNotFound, msg: "task manifest tenants/default/jobs/j/chk/3/t1.json: storage: not found",
			damage: func(t *testing.T, st storage.Store, m *Manifest) {
				if err := st.Delete(ctx, m.Tasks["t1"]); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "corrupt task manifest", is: ErrCorrupt, msg: "task manifest tenants/default/jobs/j/chk/3/t0.json: corrupt: unexpected end of JSON input",
			damage: func(t *testing.T, st storage.Store, m *Manifest) { put(t, st, m.Tasks["t0"], []byte(`{"version":1,`)) }},
		{name: "of another task", is: ErrCorrupt, msg: "t1.json: of task t1 of checkpoint 3, not of task t0",
			damage: func(t *testing.T, st storage.Store, m *Manifest) { m.Tasks["t0"] = m.Tasks["t1"] }},
		{name: "of another checkpoint", is: ErrCorrupt, msg: "of task t0 of checkpoint 3, not of task t0",
			damage: func(t *testing.T, st storage.Store, m *Manifest) { m.Checkpoint = 4 }},
		{name: "subtask out of range", is: ErrCorrupt, msg: "t0.json: subtask 0 of parallelism 2",
			damage: func(t *testing.T, st storage.Store, m *Manifest) { m.MaxParallelism = 1 }},
		{name: "no tasks", is: ErrCorrupt, msg: "the checkpoint manifest lists no task",
			damage: func(t *testing.T, st storage.Store, m *Manifest) { m.Tasks = nil }},
		{name: "not a task manifest key", is: ErrCorrupt, msg: "key tenants/default/jobs/j/t0.json is not of a task manifest",
			damage: func(t *testing.T, st storage.Store, m *Manifest) { m.Tasks["t0"] = root + "/t0.json" }},
		{name: "two roots", is: ErrCorrupt, msg: "task manifest other/chk/3/t1.json is not under tenants/default/jobs/j, as the others",
			damage: func(t *testing.T, st storage.Store, m *Manifest) {
				put(t, st, "other/chk/3/t1.json", get(t, st, m.Tasks["t1"]))
				m.Tasks["t1"] = "other/chk/3/t1.json"
			}},
		{name: "state file outside the root", is: ErrCorrupt, msg: "t1.json: node op: state snapshot manifest: file 0: key \"tenants/default/jobs/j/shared/b\"",
			damage: func(t *testing.T, st storage.Store, m *Manifest) {
				put(t, st, m.Tasks["t1"], []byte(strings.Replace(string(get(t, st, m.Tasks["t1"])), `"key":"shared/b"`, `"key":"`+root+`/shared/b"`, 1)))
			}},
		{name: "state file of two sizes", is: ErrCorrupt, msg: "t1.json: node op: state file shared/b of 12 bytes, 11 elsewhere",
			damage: func(t *testing.T, st storage.Store, m *Manifest) {
				put(t, st, m.Tasks["t1"], []byte(strings.Replace(string(get(t, st, m.Tasks["t1"])), `"key":"shared/b","size":11`, `"key":"shared/b","size":12`, 1)))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t)
			m := writeCheckpoint(t, st, root, 3)
			tc.damage(t, st, m)
			c, err := ReadContents(ctx, st, m)
			if err == nil {
				t.Fatalf("read %+v", c)
			}
			if !errors.Is(err, tc.is) || errors.Is(err, ErrRestore) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error\n\t%v\nwant one line matching %v with\n\t%s", err, tc.is, tc.msg)
			}
		})
	}
}

// FuzzReadContents: task manifests are written by workers and read by the
// leader, which keeps and copies what they list. Whatever their bytes,
// ReadContents does not panic, and every key it lists is a valid key
// under the checkpoint's root.
func FuzzReadContents(f *testing.F) {
	f.Add([]byte(`{"version":1,"checkpoint":3,"task":"t0","subtask":0,"parallelism":1,"nodes":{"op":{"state":{"files":[{"key":"shared/ab","size":3}]}}},"source":{"position":"AAE="}}`))
	f.Add([]byte(`{"version":1,"checkpoint":3,"task":"t0","subtask":0,"parallelism":1,"nodes":{"op":{"state":{"files":[{"key":"shared/../../x","size":3}]}}}}`))
	f.Add([]byte(`{"version":1,"checkpoint":3,"task":"t0","subtask":0,"parallelism":1,"nodes":{"op":{"state":{"files":[{"key":"tenants/default/jobs/j/shared/x","size":1}]}}}}`))
	f.Add([]byte(`["tenants/default/jobs/job-1/shared/x", 1.5e300, null, true, {"k": "shared/"}]`))
	st := openStore(f)
	root := JobRoot("default", "j")
	key := TaskManifestKey(root, 3, "t0")
	m := &Manifest{Version: Version, Checkpoint: 3, Tasks: map[string]string{"t0": key}, MaxParallelism: 128}
	f.Fuzz(func(t *testing.T, data []byte) {
		put(t, st, key, data)
		c, err := ReadContents(context.Background(), st, m)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%q: %v does not match ErrCorrupt", data, err)
			}
			return
		}
		for _, k := range c.Keys() {
			if err := storage.ValidateKey(k); err != nil || !strings.HasPrefix(k, root+"/") {
				t.Fatalf("%q lists %q: %v", data, k, err)
			}
		}
	})
}
