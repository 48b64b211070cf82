// Command sdkgen generates the Go, Node.js and Python SDKs of the talos-proxmox component
// provider from its schema, with Pulumi's own code generators (pkg/v3/codegen, the library behind
// `pulumi package gen-sdk`, which needs language hosts this project cannot build).
//
// The output directory is owned by sdkgen: every file under -out/{go,nodejs,python} comes from
// this tool, including the files the code generators do not emit (the Go SDK's go.mod and
// go.sum, the Python README.md beside pyproject.toml), so the whole directory is reproducible from
// schema.json and this module alone. Running it twice gives identical bytes.
//
// Usage, from this directory (paths are relative to the working directory):
//
//	go run . -schema ../../schema.json -out ../../sdk         # regenerate sdk/
//	go run . -schema ../../schema.json -out ../../sdk -check  # exit 1 and list files if sdk/ is stale
//
// Dependencies and compiler output left by building an SDK in place (node_modules, __pycache__,
// nodejs/bin, …) are neither deleted nor reported; see isBuildArtifact. `go test` here also fails
// when the repository's sdk/ is stale. tools/sdkcheck builds and type-checks the generated SDKs.
//
// Versions the SDKs depend on are pinned in pins.go.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

// Exit codes: the generated tree differs from the one on disk, or sdkgen itself failed.
const (
	exitStale = 1
	exitError = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses the command line, generates the SDKs and writes or checks them, and returns the exit
// code.
func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("sdkgen", flag.ContinueOnError)
	flags.SetOutput(stderr)
	schemaPath := flags.String("schema", "schema.json", "Pulumi package schema to generate the SDKs from")
	outDir := flags.String("out", "sdk", "directory that receives go/, nodejs/ and python/")
	check := flags.Bool("check", false, "write nothing; exit 1 and list every differing, missing or extra file if -out is stale")
	if err := flags.Parse(args); err != nil {
		return exitError
	}
	if flags.NArg() != 0 {
		say(stderr, "sdkgen: unexpected arguments %q\n", flags.Args())
		return exitError
	}

	spec, err := os.ReadFile(*schemaPath)
	if err != nil {
		say(stderr, "sdkgen: %v\n", err)
		return exitError
	}
	files, warnings, err := generate(spec)
	for _, w := range warnings {
		say(stderr, "sdkgen: warning: %s\n", w)
	}
	if err != nil {
		say(stderr, "sdkgen: %s: %v\n", *schemaPath, err)
		return exitError
	}

	if !*check {
		if err := writeTree(*outDir, files); err != nil {
			say(stderr, "sdkgen: %v\n", err)
			return exitError
		}
		say(stdout, "sdkgen: wrote %d files to %s\n", len(files), *outDir)
		return 0
	}

	diffs, err := diffTree(*outDir, files)
	if err != nil {
		say(stderr, "sdkgen: %v\n", err)
		return exitError
	}
	if len(diffs) == 0 {
		say(stdout, "sdkgen: %s is up to date with %s\n", *outDir, *schemaPath)
		return 0
	}
	for _, d := range diffs {
		say(stdout, "%-8s %s\n", d.kind, d.path)
	}
	say(stderr, "sdkgen: %s is stale (%d files differ from %s): regenerate it with sdkgen\n",
		*outDir, len(diffs), *schemaPath)
	return exitStale
}

// say prints a message; a failed write to the terminal leaves nothing better to do.
func say(w io.Writer, format string, args ...any) { _, _ = fmt.Fprintf(w, format, args...) }
