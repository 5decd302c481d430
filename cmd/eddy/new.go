package main

import (
	"bytes"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"

	eddysdk "github.com/eddy-stream/eddy"
)

// templates are the sources of `eddy new`: templates/LANG/KIND/ the
// operator's source, templates/LANG/ the build file, templates/vectors/ the
// test vector and job spec of each kind, templates/ what every project
// has. Every file ends in .tmpl so that the Go tool never takes a template
// for a package (or a go.mod for a module).
//
//go:embed templates
var templates embed.FS

// newLang is what `eddy new` needs of a language beyond its templates
// (templates/LANG/KIND/main.EXT.tmpl and the build files).
type newLang struct {
	title string
	// source is the operator's source file in the project (NAME: the
	// project's name), ext its template's extension.
	source, ext string
	// buildFiles are the project's build files, each from
	// templates/LANG/FILE.tmpl.
	buildFiles []string
	// build and test are the commands the README gives (test: besides
	// eddy test itself).
	build, test string
	// wasm is where the build writes the module (default NAME.wasm;
	// CRATE: NAME with - as _, as cargo names a library).
	wasm string
	// ready is false for a language whose templates are not written yet:
	// eddy new refuses it with a line saying so instead of writing a
	// project that cannot build. A language is offered only when its SDK
	// is embedded too (eddysdk.SDKLanguages).
	ready bool
}

var newLangs = map[string]newLang{
	"go": {title: "Go", source: "main.go", ext: "go", buildFiles: []string{"Makefile", "go.mod"},
		build: "make", test: "make test", ready: true},
	"c": {title: "C", source: "NAME.c", ext: "c", buildFiles: []string{"Makefile"},
		build: "make", test: "make test", ready: true},
	"as": {title: "AssemblyScript", source: "assembly/index.ts", ext: "ts", buildFiles: []string{"package.json"},
		build: "npm install && npm run build", test: "npm test", ready: true},
	"rust": {title: "Rust", source: "src/lib.rs", ext: "rs", buildFiles: []string{"Cargo.toml"},
		build: "RUSTC=/usr/bin/rustc /usr/bin/cargo build --offline --release --target wasm32-wasi",
		wasm:  "target/wasm32-wasi/release/CRATE.wasm", ready: true},
}

// newKind is one kind of module `eddy new` writes.
type newKind struct {
	title string
	doc   string
	// testArgs are the arguments of `eddy test MODULE.wasm` that run the
	// kind's vector as job.yaml runs it.
	testArgs []string
	// cSDK are the C SDK's sources the kind links: they set the module's
	// ABI version (sdk/c/README.md).
	cSDK  []string
	cNote string
}

// vectorArgs are the eddy test arguments of every kind's vector.
var vectorArgs = []string{"--input", "testdata/input.jsonl", "--expect", "testdata/expected.jsonl"}

// keyedArgs and windowArgs are what job.yaml's key_by, event_time and
// window say.
var (
	keyedArgs  = append(slices.Clip(vectorArgs), "--key-by", "user", "--event-time", "ts")
	windowArgs = append(slices.Clip(keyedArgs), "--window", "tumbling 1m")
)

var newKinds = map[string]newKind{
	"operator": {
		title:    "operator",
		doc:      "It passes on the records whose \"amount\" is at least a configured minimum (`{\"min\": 100}` by default).",
		testArgs: vectorArgs,
		cSDK:     []string{"eddy.c", "eddy_json.c"},
		cNote:    "eddy.c alone: an operator, ABI version 1.",
	},
	"keyed": {
		title: "keyed operator",
		doc: "It keeps keyed state and sets event-time timers: it counts each key's records and, once the key " +
			"has been quiet for a minute of event time, emits `{\"key\": …, \"events\": n}` and forgets the key.",
		testArgs: keyedArgs,
		cSDK:     []string{"eddy.c", "eddy_keyed.c", "eddy_json.c"},
		cNote:    "eddy_keyed.c: keyed state and timers, ABI version 2.",
	},
	"aggregate": {
		title: "aggregate module",
		doc: "A window node folds each window's records with it, incrementally: the result is " +
			"`{\"n\": count, \"total\": sum of \"amount\"}`.",
		testArgs: windowArgs,
		cSDK:     []string{"eddy.c", "eddy_aggregate.c", "eddy_json.c"},
		cNote:    "eddy_aggregate.c: an aggregate module, ABI version 3.",
	},
	"window": {
		title: "window function",
		doc: "A window node hands it each window's records, whole, when the window fires; it emits " +
			"`{\"key\": …, \"events\": n, \"span_ms\": last - first timestamp}`.",
		testArgs: windowArgs,
		cSDK:     []string{"eddy.c", "eddy_window.c", "eddy_json.c"},
		cNote:    "eddy_window.c: a window function, an operator of ABI version 1.",
	},
}

// projectName is what a project may be called: it names the module file,
// the Go module and the job, so it stays a plain lower-case word.
var projectName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

const newUsage = `usage: eddy new NAME --lang go|c|rust|as [--kind operator|keyed|aggregate|window] [--dir DIR]

Writes a project directory DIR (default ./NAME): the operator's source, its
build file, a README with the build command, a test vector (testdata/) that
eddy test passes, a job spec running the same vector, and the SDK (eddy-sdk/),
so that it builds with no network.
`

func cmdNew(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eddy new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, newUsage); fs.PrintDefaults() }
	lang := fs.String("lang", "", "the language: go, c, rust or as")
	kind := fs.String("kind", "operator", "the kind of module: operator, keyed, aggregate or window")
	dir := fs.String("dir", "", "the project directory (default ./NAME)")
	// NAME may come before or after the flags.
	var names []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		names = append(names, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(names) != 1 {
		return usageError{errors.New("new: want one NAME (eddy new NAME --lang go|c|rust|as)")}
	}
	p, err := newProject(names[0], *lang, *kind)
	if err != nil {
		return usageError{err}
	}
	if *dir == "" {
		*dir = p.Name
	}
	if err := p.write(*dir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s, the %s %s %s: cd %s && %s\n", *dir, p.LangTitle, p.KindTitle, p.Name, *dir, p.BuildCmd)
	return nil
}

// project is what the templates see.
type project struct {
	Name, Lang, Kind     string
	LangTitle, KindTitle string
	KindDoc              string
	TestArgs             string
	GoVersion            string
	CSDK                 []string
	CNote                string
	BuildCmd, TestCmd    string
	Wasm                 string // the module the build writes, from the project's directory
	ASCVersion           string // the assemblyscript package the SDK pins
	lang                 newLang
}

func newProject(name, lang, kind string) (*project, error) {
	if !projectName.MatchString(name) {
		return nil, fmt.Errorf("new: bad name %q: want a lower-case letter, then up to 63 of a-z, 0-9, - and _", name)
	}
	l, ok := newLangs[lang]
	if !ok {
		if lang == "" {
			return nil, errors.New("new: --lang is required: go, c, rust or as")
		}
		return nil, fmt.Errorf("new: unknown --lang %q: want go, c, rust or as", lang)
	}
	k, ok := newKinds[kind]
	if !ok {
		return nil, fmt.Errorf("new: unknown --kind %q: want operator, keyed, aggregate or window", kind)
	}
	if !l.ready || !slices.Contains(eddysdk.SDKLanguages(), lang) {
		return nil, fmt.Errorf("new: --lang %s: the %s SDK is not available yet in this eddy", lang, l.title)
	}
	return &project{
		Name: name, Lang: lang, Kind: kind,
		LangTitle: l.title, KindTitle: k.title, KindDoc: k.doc,
		TestArgs:  shellWords(k.testArgs),
		GoVersion: eddysdk.GoVersion(),
		CSDK:      k.cSDK, CNote: k.cNote,
		BuildCmd: l.build, TestCmd: l.test,
		ASCVersion: eddysdk.AssemblyScriptVersion(),
		lang:       l,
		Wasm:       moduleFile(l, name),
	}, nil
}

// shellWords joins args for a shell command line, quoting those with a
// space (all the quoting the arguments eddy new writes need).
func shellWords(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " '") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		quoted[i] = a
	}
	return strings.Join(quoted, " ")
}

func moduleFile(l newLang, name string) string {
	if l.wasm == "" {
		return name + ".wasm"
	}
	return strings.ReplaceAll(l.wasm, "CRATE", strings.ReplaceAll(name, "-", "_"))
}

// write writes the project into dir, which must be absent or empty: eddy
// new never overwrites a file.
func (p *project) write(dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("new: %s exists and is not empty", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("new: %w", err)
	}
	source := strings.ReplaceAll(p.lang.source, "NAME", p.Name)
	files := map[string]string{ // project path → template
		source:                    path.Join("templates", p.Lang, p.Kind, "main."+p.lang.ext+".tmpl"),
		"README.md":               "templates/README.md.tmpl",
		".gitignore":              "templates/gitignore.tmpl",
		"job.yaml":                path.Join("templates/vectors", p.Kind, "job.yaml.tmpl"),
		"testdata/input.jsonl":    "templates/vectors/input.jsonl",
		"testdata/expected.jsonl": path.Join("templates/vectors", p.Kind, "expected.jsonl"),
	}
	for _, f := range p.lang.buildFiles {
		files[f] = path.Join("templates", p.Lang, f+".tmpl")
	}
	for dst, src := range files {
		b, err := p.render(src)
		if err != nil {
			return fmt.Errorf("new: %s: %w", dst, err) // a defect of this binary's templates
		}
		if err := writeNewFile(filepath.Join(dir, filepath.FromSlash(dst)), b); err != nil {
			return err
		}
	}
	sdkDir := filepath.Join(dir, "eddy-sdk")
	if _, err := eddysdk.WriteSDK(sdkDir, p.Lang); err != nil {
		return fmt.Errorf("new: %w", err)
	}
	if p.Lang == "go" {
		// The SDK's copy is a module of its own, under the path its
		// packages import each other by, which go.mod's replace names.
		mod := fmt.Sprintf("module github.com/eddy-stream/eddy\n\ngo %s\n", p.GoVersion)
		if err := writeNewFile(filepath.Join(sdkDir, "go.mod"), []byte(mod)); err != nil {
			return err
		}
	}
	return nil
}

// render fills a template (a .tmpl file) or copies a file as it is.
func (p *project) render(name string) ([]byte, error) {
	raw, err := templates.ReadFile(name)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(name, ".tmpl") {
		return raw, nil
	}
	t, err := template.New(name).Option("missingkey=error").Parse(string(raw))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, p); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeNewFile(name string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return fmt.Errorf("new: %w", err)
	}
	if err := os.WriteFile(name, b, 0o644); err != nil {
		return fmt.Errorf("new: %w", err)
	}
	return nil
}
