package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/alecthomas/kong"
)

// The help of settle and of each command fits a terminal (about 40 lines,
// TestHelpFitsAScreen): flags most users never change are tagged hidden,
// and --help-all shows them. Environment variables are printed by kong
// beside their flag, so help texts never name them.

// helpAllFlag is --help-all: the help of the command with every flag.
type helpAllFlag bool

// IgnoreDefault keeps kong from running the hook for the default value.
func (helpAllFlag) IgnoreDefault() {}

// BeforeReset prints the help with the hidden flags shown, then exits 0
// (as kong's own --help does).
func (helpAllFlag) BeforeReset(ctx *kong.Context) error {
	for _, n := range ctx.Model.Node.Leaves(false) {
		for ; n != nil; n = n.Parent {
			for _, f := range n.Flags {
				f.Hidden = false
			}
		}
	}
	if err := ctx.PrintUsage(false); err != nil {
		return err
	}
	ctx.Kong.Exit(0)
	return nil
}

// printShortUsage is what `settle` alone prints: the commands and where to
// read more, instead of a parse error.
func printShortUsage(w io.Writer, k *kong.Kong) {
	var names []string
	for _, n := range k.Model.Children {
		if !n.Hidden {
			names = append(names, n.Name)
		}
	}
	fmt.Fprintf(w, "Usage: settle <command> [flags]\n\n"+
		"Commands: %s.\n\n"+
		"New here? \"settle dev\" starts a sandbox with sample traffic.\n"+
		"Run \"settle --help\" for what each command does, \"settle <command> --help\" for its flags.\n",
		strings.Join(names, ", "))
}

// helpHint names the --help that explains a parse error: the selected
// command's, else settle's.
func helpHint(err error) string {
	var pe *kong.ParseError
	if errors.As(err, &pe) && pe.Context != nil {
		if cmd := pe.Context.Selected(); cmd != nil {
			return fmt.Sprintf("run \"settle %s --help\" for its arguments and flags", cmd.Path())
		}
	}
	return "run \"settle --help\" for the commands"
}
