//go:build !linux

package main

import "syscall"

// workerAttr: only Linux can tie a child's life to its parent's; elsewhere
// the bench stops its workers itself on exit and Ctrl-C.
func workerAttr() *syscall.SysProcAttr { return nil }
