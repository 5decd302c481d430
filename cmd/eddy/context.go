package main

// The CLI's configuration file and its named contexts, in the manner of
// kubectl's kubeconfig and rpk's profiles: each context names a
// coordinator, the credentials to call it with and the CA to trust.

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"gopkg.in/yaml.v3"

	"github.com/eddy-stream/eddy/internal/atomicfile"
	"github.com/eddy-stream/eddy/scheduler/auth"
)

// cliConfig is the file: $EDDY_CONFIG, else $XDG_CONFIG_HOME/eddy/config.yaml,
// else ~/.config/eddy/config.yaml. It may hold secrets, so it is written
// with mode 0600.
type cliConfig struct {
	Current  string                 `yaml:"current,omitempty"`
	Contexts map[string]*cliContext `yaml:"contexts,omitempty"`
}

// cliContext is one named context.
type cliContext struct {
	Coordinator string `yaml:"coordinator,omitempty"`
	// Token is the token itself; TokenFile a file holding it (what a
	// bootstrap coordinator writes), read at every call.
	Token     string `yaml:"token,omitempty"`
	TokenFile string `yaml:"token_file,omitempty"`
	// CA is a PEM file of the certificate authority the coordinator's TLS
	// certificate is checked against.
	CA string `yaml:"ca,omitempty"`
}

func configPath() (string, error) {
	if p := os.Getenv("EDDY_CONFIG"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("CLI configuration: %w (set EDDY_CONFIG)", err)
	}
	return filepath.Join(dir, "eddy", "config.yaml"), nil
}

// loadConfig reads the file; a missing one is an empty configuration.
func loadConfig() (*cliConfig, string, error) {
	path, err := configPath()
	if err != nil {
		return nil, "", err
	}
	cfg := &cliConfig{Contexts: map[string]*cliContext{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return cfg, path, nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("CLI configuration: %w", err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, "", fmt.Errorf("CLI configuration %s: %v", path, oneLine(err.Error()))
	}
	if cfg.Contexts == nil {
		cfg.Contexts = map[string]*cliContext{}
	}
	return cfg, path, nil
}

func oneLine(s string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return first
}

func (c *cliConfig) save(path string) error {
	data, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("CLI configuration: %w", err)
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("CLI configuration: %w", err)
	}
	return nil
}

// context returns the context to use: name, else $EDDY_CONTEXT, else the
// current one; nil when there is none (and none was named).
func (c *cliConfig) context(name string) (*cliContext, string, error) {
	if name == "" {
		name = os.Getenv("EDDY_CONTEXT")
	}
	explicit := name != ""
	if name == "" {
		name = c.Current
	}
	if name == "" {
		return nil, "", nil
	}
	ctx, ok := c.Contexts[name]
	if !ok {
		if explicit {
			return nil, "", fmt.Errorf("no CLI context %q (eddy context list shows them)", name)
		}
		return nil, "", nil
	}
	return ctx, name, nil
}

// token returns the context's token, reading its file if it names one.
func (c *cliContext) token(name string) (string, error) {
	if c.TokenFile == "" {
		return c.Token, nil
	}
	data, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", fmt.Errorf("context %s: token file: %w", name, err)
	}
	return strings.TrimSpace(string(data)), nil
}

const contextUsage = `usage:
  eddy context set NAME [--coordinator ADDR] [--token-file FILE | --token-stdin] [--ca FILE]
                                  add or change a context (the first one added becomes current)
  eddy context use NAME           make NAME the current context
  eddy context list               the contexts; * marks the current one
  eddy context delete NAME        remove a context
The file is $EDDY_CONFIG, or config.yaml in the user's config directory under eddy/.
`

func cmdContext(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("context needs a subcommand\n" + contextUsage)}
	}
	fs := flag.NewFlagSet("context "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, path, err := loadConfig()
	if err != nil {
		return err
	}
	switch args[0] {
	case "set":
		var coord, tokenFile, ca string
		var stdin bool
		fs.StringVar(&coord, "coordinator", "", "API address of a coordinator")
		fs.StringVar(&tokenFile, "token-file", "", "file holding the API token (read at every call)")
		fs.BoolVar(&stdin, "token-stdin", false, "read the API token from standard input and store it in the configuration file")
		fs.StringVar(&ca, "ca", "", "PEM file of the CA that signed the coordinator's TLS certificate")
		if err := parseFlags(fs, args[1:], 1, "context set takes a context name"); err != nil {
			return err
		}
		name := fs.Arg(0)
		c := cfg.Contexts[name]
		if c == nil {
			c = &cliContext{}
			cfg.Contexts[name] = c
		}
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "coordinator":
				c.Coordinator = coord
			case "token-file":
				abs, _ := filepath.Abs(tokenFile)
				c.TokenFile, c.Token = abs, ""
			case "ca":
				abs, _ := filepath.Abs(ca)
				c.CA = abs
			}
		})
		if stdin {
			data, err := io.ReadAll(io.LimitReader(os.Stdin, 4096))
			if err != nil {
				return err
			}
			tok := strings.TrimSpace(string(data))
			if _, err := auth.Parse(tok); err != nil {
				return fmt.Errorf("context %s: standard input: %v", name, strings.TrimSuffix(err.Error(), ": "+auth.ErrMalformed.Error()))
			}
			c.Token, c.TokenFile = tok, ""
		}
		if cfg.Current == "" {
			cfg.Current = name
		}
		if err := cfg.save(path); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "context %s saved in %s\n", name, path)
	case "use":
		if err := parseFlags(fs, args[1:], 1, "context use takes a context name"); err != nil {
			return err
		}
		if _, ok := cfg.Contexts[fs.Arg(0)]; !ok {
			return fmt.Errorf("no CLI context %q (eddy context list shows them)", fs.Arg(0))
		}
		cfg.Current = fs.Arg(0)
		if err := cfg.save(path); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "current context: %s\n", cfg.Current)
	case "delete":
		if err := parseFlags(fs, args[1:], 1, "context delete takes a context name"); err != nil {
			return err
		}
		if _, ok := cfg.Contexts[fs.Arg(0)]; !ok {
			return fmt.Errorf("no CLI context %q (eddy context list shows them)", fs.Arg(0))
		}
		delete(cfg.Contexts, fs.Arg(0))
		if cfg.Current == fs.Arg(0) {
			cfg.Current = ""
		}
		return cfg.save(path)
	case "list":
		if err := parseFlags(fs, args[1:], 0, "context list takes no arguments"); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CURRENT\tNAME\tCOORDINATOR\tTOKEN\tCA")
		names := make([]string, 0, len(cfg.Contexts))
		for n := range cfg.Contexts {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			c := cfg.Contexts[n]
			cur := ""
			if n == cfg.Current {
				cur = "*"
			}
			tok := "-"
			switch {
			case c.TokenFile != "":
				tok = "file " + c.TokenFile
			case c.Token != "":
				tok = "stored " + tokenID(c.Token) // never the secret
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cur, n, cmp.Or(c.Coordinator, "-"), tok, cmp.Or(c.CA, "-"))
		}
		return tw.Flush()
	default:
		return usageError{fmt.Errorf("unknown context subcommand %q\n%s", args[0], contextUsage)}
	}
	return nil
}

// tokenID is the public part of a token, for display.
func tokenID(tok string) string {
	t, err := auth.Parse(tok)
	if err != nil {
		return "(malformed)"
	}
	return t.ID
}

// registerLocalContext makes (or updates) the context a standalone's
// users reach it through, with the token file it wrote, and makes it
// current when there is no current context: `eddy standalone` and the
// next command need no set-up between them.
func registerLocalContext(name, addr, tokenFile, ca string) (string, error) {
	cfg, path, err := loadConfig()
	if err != nil {
		return "", err
	}
	if ca != "" {
		ca, _ = filepath.Abs(ca)
	}
	cfg.Contexts[name] = &cliContext{Coordinator: addr, TokenFile: tokenFile, CA: ca}
	if cfg.Current == "" {
		cfg.Current = name
	}
	return path, cfg.save(path)
}
