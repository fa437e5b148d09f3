//go:build !unix

package main

import "os"

// Elsewhere only the in-process mutex serialises writers.
func lockFile(*os.File) error { return nil }

func unlockFile(*os.File) error { return nil }
