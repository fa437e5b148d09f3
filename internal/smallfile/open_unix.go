//go:build unix

package smallfile

import "syscall"

// openNoWait opens a named pipe without waiting for a writer (on a
// regular file it changes nothing), so the check after opening runs.
const openNoWait = syscall.O_NONBLOCK
