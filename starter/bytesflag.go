package main

import "github.com/secops-agent/investigator/internal/size"

// bytesFlag is a flag holding a byte count written with a binary unit
// ("10GiB", "500MiB") or as a plain number.
type bytesFlag struct{ n *int64 }

func (f bytesFlag) String() string {
	if f.n == nil {
		return ""
	}
	return size.Bytes(*f.n)
}

func (f bytesFlag) Set(s string) error {
	n, err := size.Parse(s)
	if err == nil {
		*f.n = n
	}
	return err
}

func (bytesFlag) Type() string { return "bytes" }
