package host

import (
	"crypto/rand"
	"time"

	"github.com/tetratelabs/wazero"
)

// moduleConfig is the per-instance WASI sandbox: no filesystem (no
// preopens), no environment, no arguments, real clocks, crypto-grade
// randomness, and stdout/stderr into the task log.
func (i *Instance) moduleConfig() wazero.ModuleConfig {
	return wazero.NewModuleConfig().
		// Anonymous: instances never collide in the runtime's module
		// namespace, and no module can import from an operator instance.
		WithName("").
		// _initialize is called by the host under a deadline, not by wazero.
		WithStartFunctions().
		WithStdout(&i.log.stdout).
		WithStderr(&i.log.stderr).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(i.nanosleep).
		WithRandSource(rand.Reader)
}

// nanosleep replaces wazero's WithSysNanosleep (a plain time.Sleep): the
// interrupt flag cannot reach a guest blocked inside a host function, so a
// guest calling sleep(3600) would otherwise hold its task far past
// CallTimeout. The sleep ends when the flag is set; Instance.call then
// reports the deadline.
func (i *Instance) nanosleep(ns int64) {
	if ns <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-i.wake:
	}
}
