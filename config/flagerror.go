package config

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
)

// The forms a flag's value is written in, as flag and environment errors
// name them.
const (
	wholeNumber = "a whole number"
	number      = "a number"
	duration    = "a duration such as 30s or 3m"
	boolean     = "true or false"
)

// form is the written form of a flag of pflag type typ, "" for a type
// whose own error says it (bytesFlag's).
func form(typ string) string {
	switch typ {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "count":
		return wholeNumber
	case "float32", "float64":
		return number
	case "duration":
		return duration
	case "bool":
		return boolean
	}
	return ""
}

// FlagError is a command line's flag error as one sentence naming the
// flag and the form its value takes: pflag's quotes the parser
// (`strconv.ParseInt: parsing "abc": invalid syntax`). The command roots
// set it with cobra's SetFlagErrorFunc; the value is the user's, shown
// quoted and clipped.
func FlagError(err error) error {
	var invalid *pflag.InvalidValueError
	if errors.As(err, &invalid) {
		f := invalid.GetFlag()
		what := form(f.Value.Type())
		switch {
		case what == "":
			return fmt.Errorf("--%s: %w", f.Name, invalid.Unwrap())
		case errors.Is(err, strconv.ErrRange):
			return fmt.Errorf("--%s takes %s, and %.40q is out of range", f.Name, what, invalid.GetValue())
		}
		return fmt.Errorf("--%s takes %s, not %.40q", f.Name, what, invalid.GetValue())
	}
	var missing *pflag.ValueRequiredError
	if errors.As(err, &missing) {
		if what := form(missing.GetFlag().Value.Type()); what != "" {
			return fmt.Errorf("--%s needs a value: %s", missing.GetFlag().Name, what)
		}
		return fmt.Errorf("--%s needs a value", missing.GetFlag().Name)
	}
	return err
}
