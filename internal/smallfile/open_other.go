//go:build !unix

package smallfile

// openNoWait: no named pipe waits on open here.
const openNoWait = 0
