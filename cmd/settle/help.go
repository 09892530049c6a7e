package main

import (
	"bytes"
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

// examples are the last line of each command's help (TestHelpEndsWithAnExample
// wants one for every command).
var examples = map[string]string{
	"":                  "settle dev",
	"dev":               "settle dev --no-sample",
	"run":               "settle run --brokers kafka:9092 --database-url postgres://settle@db/settle --admin-token ana:resolve=$ANA_TOKEN",
	"migrate":           "settle migrate --owner-url postgres://owner@db/settle",
	"produce":           "settle produce records.jsonl --brokers kafka:9092",
	"balance":           "settle balance acme cust-1 --rows 50",
	"statement":         "settle statement acme 2026-11 --subject cust-1",
	"period close":      "settle period close acme 2026-11",
	"conflicts list":    "settle conflicts list --tenant acme --older-than 2d",
	"conflicts show":    "settle conflicts show 42",
	"conflicts diff":    "settle conflicts diff 42",
	"conflicts resolve": `settle conflicts resolve 42 --reject --reason "duplicate of u-7"`,
	"conflicts export":  "settle conflicts export --status all -o cases.csv",
	"explain":           "settle explain acme 2026-11 u-1",
	"dlq list":          "settle dlq list --reason invalid_json",
	"dlq show":          "settle dlq show 7",
	"dlq replay":        "settle dlq replay --reason transient_exhausted --dry-run",
	"dlq resend":        "settle dlq resend 7 --set currency=EUR --reason typo",
	"reconcile":         "settle reconcile --brokers kafka:9092",
	"prune":             "settle prune --dead-letters-after 720h --dry-run",
	"verify":            "settle verify --brokers kafka:9092 --period 2026-11 --from-heads heads-2026-10.json --heads-out heads-2026-11.json",
	"canary":            "settle canary --brokers kafka:9092",
}

// helpPrinter is kong's help with three changes: a choice between required
// flags reads "(--accept | --reject)" in the usage line (kong lists them
// side by side, as if both were needed); -h, --help is not listed (whoever
// reads it found it); and the help ends with the command's example.
func helpPrinter(options kong.HelpOptions, ctx *kong.Context) error {
	var buf bytes.Buffer
	out := ctx.Stdout
	ctx.Stdout = &buf
	hidden := ctx.Model.HelpFlag.Hidden
	ctx.Model.HelpFlag.Hidden = true
	err := kong.DefaultHelpPrinter(options, ctx)
	ctx.Stdout, ctx.Model.HelpFlag.Hidden = out, hidden
	if err != nil {
		return err
	}
	text, path := buf.String(), ""
	if n := ctx.Selected(); n != nil {
		path = n.Path()
		usage, rest, _ := strings.Cut(text, "\n")
		for _, group := range xorGroups(n) {
			usage = strings.Replace(usage, strings.Join(group, " "), "("+strings.Join(group, " | ")+")", 1)
		}
		text = usage + "\n" + rest
	}
	if ex := examples[path]; ex != "" {
		text = strings.TrimRight(text, "\n") + "\nExample: " + ex + "\n"
	}
	_, err = io.WriteString(out, text)
	return err
}

// xorGroups are n's required flags that exclude each other, each group as
// kong's usage line writes them ("--accept", "--reject").
func xorGroups(n *kong.Node) [][]string {
	byGroup := map[string][]string{}
	var order []string
	for _, f := range n.Flags {
		if !f.Required {
			continue
		}
		for _, g := range f.Xor {
			if byGroup[g] == nil {
				order = append(order, g)
			}
			byGroup[g] = append(byGroup[g], "--"+f.Name)
		}
	}
	var out [][]string
	for _, g := range order {
		if len(byGroup[g]) > 1 {
			out = append(out, byGroup[g])
		}
	}
	return out
}
