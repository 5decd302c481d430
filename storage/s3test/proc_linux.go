package s3test

import "syscall"

// sysProcAttr kills the server if the test binary dies first (a panic, a
// timeout, kill -9), so that no versitygw outlives its test.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
