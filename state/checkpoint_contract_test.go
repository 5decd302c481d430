package state

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/dataflow/checkpoint"
)

// TestSnapshotManifestIsCheckpointContract pins the contract between this
// package and dataflow/checkpoint, which reads the files of a snapshot
// manifest (SnapshotManifest.Files) out of task manifests to keep and copy
// them: for each backend, the manifest SnapshotTo returns, as a task
// manifest records it, decodes to exactly the files it uploaded, with
// their sizes, each at its checkpoint.StateFileKey under the root.
func TestSnapshotManifestIsCheckpointContract(t *testing.T) {
	ctx := context.Background()
	root := checkpoint.JobRoot("default", "job")
	for _, bk := range backendKinds {
		t.Run(bk.name, func(t *testing.T) {
			blobs := blobKinds(t)[0].open(t)
			clock := &fakeClock{}
			clock.ms.Store(time.Unix(1_700_000_000, 0).UnixMilli())
			all := Range{0, testMaxP}
			s, err := bk.open(t, clock.now).OpenTask(testScope, testMaxP, all)
			must(t, err)
			var ms []SnapshotManifest
			for round := range 2 { // the second is incremental on Pebble
				fillMixed(t, s, all, 50+round*50)
				m, err := SnapshotTo(ctx, s, blobs, root)
				must(t, err)
				ms = append(ms, m)
			}
			uploaded, err := blobs.List(ctx, checkpoint.SharedPrefix(root))
			must(t, err)
			sizes := map[string]int64{}
			for _, info := range uploaded {
				sizes[info.Key] = info.Size
			}
			listed := map[string]bool{}
			for i, m := range ms {
				raw, err := json.Marshal(m)
				must(t, err)
				files, err := checkpoint.NodeSnapshot{State: raw}.StateFiles()
				must(t, err)
				var want []checkpoint.StateFile
				for _, f := range m.Files {
					want = append(want, checkpoint.StateFile{Key: f.Key, Size: f.Size})
				}
				if !slices.Equal(files, want) || len(files) == 0 {
					t.Fatalf("snapshot %d: checkpoint reads files %v, state wrote %v", i, files, want)
				}
				for j, f := range files {
					key := checkpoint.StateFileKey(root, f.Key)
					if size, ok := sizes[key]; !ok || size != f.Size {
						t.Errorf("snapshot %d: file %s of %d bytes: in storage %v with %d bytes", i, key, f.Size, ok, size)
					}
					if sk := m.Files[j].StorageKey(root); key != sk {
						t.Errorf("snapshot %d: checkpoint.StateFileKey %s, File.StorageKey %s", i, key, sk)
					}
					listed[key] = true
				}
			}
			// Nothing was uploaded that no snapshot lists: the leader would
			// delete it, or a savepoint miss it.
			if len(listed) != len(sizes) {
				t.Errorf("uploaded %d files, the snapshots list %d: %v", len(sizes), len(listed), fmt.Sprint(uploaded))
			}
		})
	}
}
