// Package smallfile reads the small files the commands are given
// (configuration, price and tables files, tokens, alerts, eval cases)
// whole, bounded: os.ReadFile on /dev/zero, a named pipe or a huge file
// never returns, or ends in "fatal error: out of memory".
package smallfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// DefaultMax is the cap for a configuration file: those shipped are a few
// KiB.
const DefaultMax = 1 << 20

// ErrTooLarge matches (errors.Is) the error of a file over the cap.
var ErrTooLarge = errors.New("larger than the limit")

type tooLarge struct{ max int }

func (e tooLarge) Error() string     { return "it is larger than the " + Limit(e.max) + " limit" }
func (e tooLarge) Is(err error) bool { return err == ErrTooLarge }

// NotRegularError is the error for a path that is not a regular file.
type NotRegularError struct{ Mode fs.FileMode }

func (e *NotRegularError) Error() string {
	switch m := e.Mode; {
	case m.IsDir():
		return "it is a directory"
	case m&fs.ModeNamedPipe != 0:
		return "it is a named pipe, not a regular file"
	case m&fs.ModeSocket != 0:
		return "it is a socket, not a regular file"
	case m&fs.ModeDevice != 0:
		return "it is a device, not a regular file"
	}
	return "it is not a regular file"
}

// Read returns the bytes of the regular file at path, at most max. It
// refuses anything else before opening it (opening a named pipe waits for
// a writer; a device may never end), and again after, on the file it
// opened without waiting (the path may have been replaced in between).
// Its errors are one clause without the path, for the caller to name the
// file: "no such file or directory", "it is a directory", "it is larger
// than the 1 MiB limit".
func Read(path string, max int) ([]byte, error) {
	data, _, err := ReadInfo(path, max)
	return data, err
}

// ReadInfo is Read that also returns what the file it read says of itself
// (its mode, for a caller that checks who may read it).
func ReadInfo(path string, max int) ([]byte, fs.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, bare(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, &NotRegularError{fi.Mode()}
	}
	beforeOpen()
	f, err := os.OpenFile(path, os.O_RDONLY|openNoWait, 0)
	if err != nil {
		return nil, nil, bare(err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, nil, bare(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, &NotRegularError{fi.Mode()}
	}
	// The size can change after the stat: the limit is on what is read.
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, nil, bare(err)
	}
	if len(data) > max {
		return nil, nil, tooLarge{max}
	}
	return data, fi, nil
}

// beforeOpen lets a test replace the path between the two checks.
var beforeOpen = func() {}

// Limit renders a cap: "1 MiB", "64 KiB", "100 bytes".
func Limit(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// bare drops the operation and path an *fs.PathError repeats.
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
