package host

import "syscall"

// mapNoReserve keeps the kernel from counting the whole mapping against
// the commit limit when it is made: only the pages a guest writes are used.
const mapNoReserve = syscall.MAP_NORESERVE
