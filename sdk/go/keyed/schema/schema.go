// Package schema, imported for its effect only, makes a module declare ABI
// version 4, which keyed.Schema and keyed.Value.GetSchema need (schema
// versions of state values; abi/ABI.md, "Version 4"):
//
//	import (
//		"github.com/eddy-stream/eddy/sdk/go/keyed"
//		_ "github.com/eddy-stream/eddy/sdk/go/keyed/schema"
//	)
//
//	c.count = keyed.ValueState("count", keyed.Schema(1))
//	b, schema, ok := c.count.GetSchema()
//
// It is a package of its own for the reason package keyed is one: the
// version must be known before eddy_open, and nothing in a module can tell
// at run time which functions were linked. A module that uses keyed alone
// stays at version 2 and runs on hosts that know nothing of version 4.
//
// It has no API and is not for anything else.
package schema

import (
	// keyed's init sets version 2; importing it runs that first.
	"github.com/eddy-stream/eddy/sdk/go/internal/guest"
	_ "github.com/eddy-stream/eddy/sdk/go/keyed"
)

// abiVersion is the ABI version that defines schema versions of state.
const abiVersion = 4

func init() { guest.Version = abiVersion }
