package abi_test

import (
	"slices"
	"testing"

	"github.com/eddy-stream/eddy/abi"
)

// TestImportVersions checks that every host import names the version that
// introduced it, within the supported versions, and that version 1 is
// exactly emit, log and fail: a module declaring version 1 must keep
// working on every host.
func TestImportVersions(t *testing.T) {
	var v1 []string
	for name := range abi.HostImports {
		v := abi.ImportVersion(name)
		if !slices.Contains(abi.SupportedVersions, v) {
			t.Errorf("import %s: version %d is not a supported version %v", name, v, abi.SupportedVersions)
		}
		if v > abi.Version {
			t.Errorf("import %s: version %d is newer than abi.Version %d", name, v, abi.Version)
		}
		if v == 1 {
			v1 = append(v1, name)
		}
	}
	slices.Sort(v1)
	if want := []string{abi.ImportEmit, abi.ImportFail, abi.ImportLog}; !slices.Equal(v1, want) {
		t.Errorf("version 1 imports = %v, want %v", v1, want)
	}
	if v := abi.ImportVersion("nope"); v != 0 {
		t.Errorf("ImportVersion(nope) = %d, want 0", v)
	}
	if _, ok := abi.OptionalExports[abi.ExportOnTimer]; !ok {
		t.Errorf("%s is not an optional export", abi.ExportOnTimer)
	}
}
