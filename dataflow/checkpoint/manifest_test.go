package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/storage"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func openStore(t testing.TB) storage.Store {
	t.Helper()
	st, err := storage.Open(context.Background(), "file://"+t.TempDir(), storage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func put(t testing.TB, st storage.Store, key string, data []byte) {
	t.Helper()
	if err := st.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
}

func get(t testing.TB, st storage.Store, key string) []byte {
	t.Helper()
	rc, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(rc); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) []byte {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed (the on-disk format must stay readable; -update only for a deliberate change):\n got %s\nwant %s", name, got, want)
	}
	return want
}

// TestManifestFormat: the bytes of a checkpoint manifest (as the leader
// writes it) and of a task manifest (as a task writes it) are version 1
// with the field names checkpoints on disk have; decoding and encoding
// them again gives the same bytes.
func TestManifestFormat(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	root := JobRoot("default", "job-3")
	m := &Manifest{Job: "job-3", Checkpoint: 12, Tasks: map[string]string{
		"txns[0]": TaskManifestKey(root, 12, "txns[0]"), "per_card[1]": TaskManifestKey(root, 12, "per_card[1]")}, MaxParallelism: 128}
	if err := WriteManifest(ctx, st, ManifestKey(root, 12), m); err != nil {
		t.Fatal(err)
	}
	golden(t, "manifest.json", get(t, st, ManifestKey(root, 12)))
	got, err := ReadManifest(ctx, st, ManifestKey(root, 12))
	if err != nil {
		t.Fatal(err)
	}
	if want := *m; got.Version != Version || fmt.Sprint(got.Tasks) != fmt.Sprint(want.Tasks) || got.Job != want.Job || got.Checkpoint != 12 || got.MaxParallelism != 128 || got.Savepoint {
		t.Fatalf("read %+v", got)
	}

	tm := TaskManifest{Version: Version, Checkpoint: 12, Task: "txns[0]", Subtask: 0, Parallelism: 2, Watermark: 1700000000000,
		Nodes: map[string]NodeSnapshot{
			"txns": {},
			"per_card": {State: json.RawMessage(`{"format":1,"kind":"full","files":[{"key":"shared/` + strings.Repeat("ab", 32) + `","sha256":"` +
				strings.Repeat("ab", 32) + `","size":17078}],"groups":{"start":0,"end":64},"max_parallelism":128,"scope":{"tenant":"default","job":"job-3","operator":"per_card"},"full_size":17078,"incremental_size":17078}`)},
		},
		Source: &SourceSnapshot{Node: "txns", Subtask: 0, Parallelism: 2, Position: []byte{0, 0, 0, 10}, MaxTimestamp: 1700000003000},
		Sink:   &SinkSnapshot{Node: "out", Staged: []string{".out.jsonl.part-0-12.inprogress"}}}
	data, err := json.Marshal(&tm)
	if err != nil {
		t.Fatal(err)
	}
	want := golden(t, "task-manifest.json", data)
	var back TaskManifest
	if err := json.Unmarshal(want, &back); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(&back)
	if !bytes.Equal(again, want) {
		t.Errorf("task manifest does not survive a round trip:\n%s\n%s", again, want)
	}
	files, err := back.Nodes["per_card"].StateFiles()
	if err != nil || len(files) != 1 || files[0] != (StateFile{Key: "shared/" + strings.Repeat("ab", 32), Size: 17078}) {
		t.Errorf("state files %+v, %v", files, err)
	}
	if files, err := back.Nodes["txns"].StateFiles(); err != nil || files != nil {
		t.Errorf("state files of a node without state: %+v, %v", files, err)
	}
}

// TestReadManifestErrors: what is not a checkpoint manifest is ErrCorrupt;
// a missing one storage.ErrNotFound; both name the key.
func TestReadManifestErrors(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	for _, tc := range []struct {
		name string
		data string // "" for none
		is   error
	}{
		{name: "missing", is: storage.ErrNotFound},
		{name: "not json", data: `{"version":1,`, is: ErrCorrupt},
		{name: "empty", data: `{"version":1}`, is: ErrCorrupt},
		{name: "other version", data: `{"version":2,"checkpoint":3,"tasks":{"a":"p/chk/3/a.json"}}`, is: ErrCorrupt},
		{name: "no tasks", data: `{"version":1,"checkpoint":3,"tasks":{}}`, is: ErrCorrupt},
		{name: "no id", data: `{"version":1,"tasks":{"a":"p/chk/3/a.json"}}`, is: ErrCorrupt},
	} {
		key := "p/chk/" + strings.ReplaceAll(tc.name, " ", "-") + "/_manifest.json"
		if tc.data != "" {
			put(t, st, key, []byte(tc.data))
		}
		_, err := ReadManifest(ctx, st, key)
		if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), key) || errors.Is(err, ErrRestore) {
			t.Errorf("%s: %v, want %v naming %s", tc.name, err, tc.is, key)
		}
	}
}

func TestStateFilesErrors(t *testing.T) {
	for _, state := range []string{
		`{"files":[{"key":"tenants/default/jobs/j/shared/ab","size":3}]}`, // not relative to the root
		`{"files":[{"key":"shared/../x","size":3}]}`,
		`{"files":[{"key":"chk/3/a.json","size":3}]}`,
		`{"files":[{"key":"shared/ab","size":-1}]}`,
		`{"files":{"key":"shared/ab"}}`,
		`[1,2]`,
		`{"files":[`,
	} {
		if files, err := (NodeSnapshot{State: json.RawMessage(state)}).StateFiles(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, %v; want ErrCorrupt", state, files, err)
		}
	}
}

func TestRestoreError(t *testing.T) {
	cause := fmt.Errorf("checkpoint manifest k: %w", storage.ErrNotFound)
	err := fmt.Errorf("job j: %w", &RestoreError{Checkpoint: 4, Err: cause})
	if !errors.Is(err, ErrRestore) || !errors.Is(err, storage.ErrNotFound) || errors.Is(err, ErrIncompatible) {
		t.Errorf("%v matches the wrong sentinels", err)
	}
	if got := err.Error(); got != "job j: restore checkpoint 4: checkpoint manifest k: storage: not found" {
		t.Errorf("text %q", got)
	}
	if id, ok := FailedRestore(err); !ok || id != 4 {
		t.Errorf("FailedRestore = %d, %v", id, ok)
	}
	unknown := &RestoreError{Err: cause}
	if id, ok := FailedRestore(unknown); ok || unknown.Error() != "restore: checkpoint manifest k: storage: not found" || !errors.Is(unknown, ErrRestore) {
		t.Errorf("without an id: %d, %v, %q", id, ok, unknown.Error())
	}
	if _, ok := FailedRestore(cause); ok {
		t.Error("FailedRestore of a plain error")
	}
}
