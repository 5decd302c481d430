// Package eddy carries the source of the guest SDKs inside the eddy binary,
// so that `eddy new` can write them into a project that lives outside this
// repository, on a machine with no network to fetch them from. It is the
// one package at the root of the module because go:embed reaches only
// files at or below the embedding package's directory, and the Go SDK
// needs abi/ as well as sdk/go.
//
// It is not the Go SDK (that is sdk/go, package eddy too) and holds no code
// a guest or the host runs.
package eddy

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The patterns name source files, never a whole tree that a build writes
// into: go:embed reads the working directory, not git, so sdk/rust/target
// or sdk/assemblyscript/node_modules would otherwise be embedded from a
// developer's checkout. Adding a language is one go:embed line here and
// one entry in sdkDirs (cmd/eddy has the templates of all four). Rust and
// AssemblyScript, once sdk/rust and sdk/assemblyscript are in this tree:
//
//	//go:embed sdk/rust/Cargo.toml sdk/rust/README.md sdk/rust/src
//	//go:embed sdk/assemblyscript/package.json sdk/assemblyscript/package-lock.json sdk/assemblyscript/README.md sdk/assemblyscript/assembly
//
//	"rust": {"sdk/rust", "abi/ABI.md"},
//	"as":   {"sdk/assemblyscript", "abi/ABI.md"},
//
// abi/ and abi/jsonscan are globbed, not listed: a file added there is
// part of what the Go SDK compiles (WriteSDK leaves out the _test.go files).
//
//go:embed abi/ABI.md abi/*.go abi/jsonscan/*.go abi/jsonscan/*.s
//go:embed sdk/go
//go:embed sdk/c
//go:embed sdk/rust/Cargo.toml sdk/rust/README.md sdk/rust/src
//go:embed sdk/assemblyscript/package.json sdk/assemblyscript/package-lock.json sdk/assemblyscript/README.md sdk/assemblyscript/assembly
var sources embed.FS

// sdkDirs are, per language, the embedded directories a project of that
// language needs, as paths from the repository root.
var sdkDirs = map[string][]string{
	"go":   {"abi", "sdk/go"},
	"c":    {"sdk/c", "abi/ABI.md"},
	"rust": {"sdk/rust", "abi/ABI.md"},
	"as":   {"sdk/assemblyscript", "abi/ABI.md"},
}

// ErrNoSDK is returned by WriteSDK for a language whose SDK this binary
// does not carry.
var ErrNoSDK = errors.New("eddy: no SDK embedded for this language")

// SDKLanguages are the languages whose SDK this binary carries, sorted.
func SDKLanguages() []string {
	langs := make([]string, 0, len(sdkDirs))
	for l := range sdkDirs {
		langs = append(langs, l)
	}
	slices.Sort(langs)
	return langs
}

// WriteSDK writes the SDK of lang under dir with the repository's layout
// (dir/sdk/c/eddy.h, dir/abi/abi.go, …), without tests and test data,
// and returns the paths it wrote, relative to dir. dir is created; files
// already there are overwritten.
func WriteSDK(dir, lang string) ([]string, error) {
	roots, ok := sdkDirs[lang]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoSDK, lang)
	}
	var written []string
	for _, root := range roots {
		err := fs.WalkDir(sources, root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return fs.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(p, "_test.go") {
				return nil
			}
			// A root like "abi" walks the embedded abi/ only: the files
			// the pattern named, not abi/'s tests.
			b, err := sources.ReadFile(p)
			if err != nil {
				return err
			}
			dst := filepath.Join(dir, filepath.FromSlash(p))
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(dst, b, 0o644); err != nil {
				return err
			}
			written = append(written, p)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("write the %s SDK: %w", lang, err)
		}
	}
	return written, nil
}

//go:embed go.mod
var goMod string

// GoVersion is the go directive of this module's go.mod ("1.26.0"): what
// the Go SDK's copy declares, so that it compiles with the language version
// it was written for.
func GoVersion() string {
	for _, line := range strings.Split(goMod, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// AssemblyScriptVersion is the version of the npm package assemblyscript
// that the embedded AssemblyScript SDK pins (its package.json), which a
// project pins too; "" when this binary carries no AssemblyScript SDK.
func AssemblyScriptVersion() string {
	b, err := sources.ReadFile("sdk/assemblyscript/package.json")
	if err != nil {
		return ""
	}
	var pkg struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if json.Unmarshal(b, &pkg) != nil {
		return ""
	}
	return pkg.DevDependencies["assemblyscript"]
}
