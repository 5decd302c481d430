//go:build !wasip1

package schema

import (
	"testing"

	"github.com/eddy-stream/eddy/sdk/go/internal/guest"
)

func TestVersion(t *testing.T) {
	if guest.Version != 4 {
		t.Fatalf("importing keyed/schema leaves the module at version %d, want 4", guest.Version)
	}
}
