//go:build unix && !linux

package host

// mapNoReserve: other systems commit anonymous pages when they are
// touched anyway.
const mapNoReserve = 0
