package kafka

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
)

// TestSecurityOptions: the password comes from the environment variable
// the spec names, and a missing variable or an unusable CA file is one
// clear line.
func TestSecurityOptions(t *testing.T) {
	t.Setenv("EDDY_TEST_KAFKA_PASSWORD", "pw")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		sec  Security
		want string // "" for no error
	}{
		{"none", Security{}, ""},
		{"plain", Security{SASL: &jobspec.KafkaSASL{Mechanism: "PLAIN", Username: "u", PasswordEnv: "EDDY_TEST_KAFKA_PASSWORD"}}, ""},
		{"scram-512 and tls", Security{SASL: &jobspec.KafkaSASL{Mechanism: "SCRAM-SHA-512", Username: "u", PasswordEnv: "EDDY_TEST_KAFKA_PASSWORD"}, TLS: &jobspec.KafkaTLS{}}, ""},
		{"missing variable", Security{SASL: &jobspec.KafkaSASL{Mechanism: "PLAIN", Username: "u", PasswordEnv: "EDDY_TEST_KAFKA_NOPE"}},
			"sasl: the environment variable EDDY_TEST_KAFKA_NOPE (password_env) is not set on this worker"},
		{"missing ca file", Security{TLS: &jobspec.KafkaTLS{CAFile: ca + ".missing"}}, "tls.ca_file: open "},
		{"bad ca file", Security{TLS: &jobspec.KafkaTLS{CAFile: ca}}, "holds no PEM certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts, err := c.sec.options()
			switch {
			case c.want == "" && err != nil:
				t.Fatal(err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			case c.want == "":
				n := 0
				if c.sec.SASL != nil {
					n++
				}
				if c.sec.TLS != nil {
					n++
				}
				if len(opts) != n {
					t.Fatalf("%d options, want %d", len(opts), n)
				}
			}
		})
	}
}
