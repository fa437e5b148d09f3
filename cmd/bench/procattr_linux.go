package main

import "syscall"

// workerAttr makes a worker die with the bench, even when the bench is
// killed and cannot stop it.
func workerAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
