package checkpoint

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/eddy-stream/eddy/storage"
)

// Names of the layout, relative to a root.
const (
	// checkpointsDir holds one directory per checkpoint id.
	checkpointsDir = "chk"
	// SharedDir holds the state files of every checkpoint of a root. The
	// keys of state files in task manifests start with it.
	SharedDir = "shared"
	// manifestName is the file name of a checkpoint manifest.
	manifestName = "_manifest.json"
)

// TenantRoot is where the checkpoints and savepoints of a tenant live:
// tenants/<tenant>. Every key of this package for the tenant is under it.
func TenantRoot(tenant string) string { return "tenants/" + tenant }

// JobRoot is the root of a job's checkpoints in its checkpoint storage:
// tenants/<tenant>/jobs/<job>.
func JobRoot(tenant, job string) string { return TenantRoot(tenant) + "/jobs/" + job }

// CheckpointsPrefix is the prefix of every checkpoint directory under
// root: <root>/chk/.
func CheckpointsPrefix(root string) string { return root + "/" + checkpointsDir + "/" }

// CheckpointDir is the directory of checkpoint id under root, with a
// trailing slash: <root>/chk/<id>/. It holds the checkpoint manifest and
// the task manifests.
func CheckpointDir(root string, id int64) string {
	return CheckpointsPrefix(root) + strconv.FormatInt(id, 10) + "/"
}

// ManifestKey is the key of the manifest of checkpoint id under root.
func ManifestKey(root string, id int64) string { return CheckpointDir(root, id) + manifestName }

// TaskManifestKey is the key of a task's manifest of checkpoint id under
// root.
func TaskManifestKey(root string, id int64, task string) string {
	return CheckpointDir(root, id) + task + ".json"
}

// SharedPrefix is the prefix of every state file under root: <root>/shared/.
func SharedPrefix(root string) string { return root + "/" + SharedDir + "/" }

// StateFileKey is the key in storage of a state file that a task manifest
// under root records as key (relative to the root: "shared/<sha256>").
func StateFileKey(root, key string) string { return root + "/" + key }

// SavepointDir is the directory of the savepoint of checkpoint id of a
// job: tenants/<tenant>/savepoints/<job>-<id>, a root of its own. It is
// what a user is shown and gives back as from_savepoint.
func SavepointDir(tenant, job string, id int64) string {
	return TenantRoot(tenant) + "/savepoints/" + job + "-" + strconv.FormatInt(id, 10)
}

// SavepointManifestKey is the key of the checkpoint manifest of the
// savepoint in dir.
func SavepointManifestKey(dir string) string { return dir + "/" + manifestName }

// SavepointDirOf is the directory of a savepoint's manifest key: the
// inverse of SavepointManifestKey.
func SavepointDirOf(manifestKey string) string {
	return strings.TrimSuffix(manifestKey, "/"+manifestName)
}

// ParseSavepointPath turns what a user gives as from_savepoint (a savepoint
// directory or its manifest key, with or without a trailing slash) into the
// key of the checkpoint manifest to restore from.
func ParseSavepointPath(p string) (string, error) {
	dir := strings.TrimSuffix(strings.TrimSpace(p), "/")
	key := SavepointManifestKey(SavepointDirOf(dir))
	if err := storage.ValidateKey(key); err != nil {
		return "", fmt.Errorf("savepoint path %q: %w", p, err)
	}
	return key, nil
}

// RootOf returns the root of a task manifest's key, <root>/chk/<id>/<task>.json:
// the root the state files it records are under.
func RootOf(taskManifestKey string) (string, error) {
	dir, name := path.Split(taskManifestKey)
	chk, id := path.Split(strings.TrimSuffix(dir, "/"))
	root, ok := strings.CutSuffix(chk, "/"+checkpointsDir+"/")
	if n, err := strconv.ParseInt(id, 10, 64); !ok || root == "" || name == "" || err != nil || n <= 0 {
		return "", fmt.Errorf("key %s is not of a task manifest (<root>/%s/<id>/<task>.json)", taskManifestKey, checkpointsDir)
	}
	return root, nil
}

// validStateKey reports whether key, a state file's key in a task
// manifest, is relative to the root and under SharedDir: the one place
// where the leader keeps, and a savepoint copies, state files.
func validStateKey(key string) bool {
	return strings.HasPrefix(key, SharedDir+"/") && storage.ValidateKey(key) == nil
}
