package kafkatest_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/eddy-stream/eddy/connectors/kafka/kafkatest"
)

// TestSecurity starts brokers with SASL and/or TLS and checks that a
// client with the right credentials and CA gets through (franz-go and
// kcat through the helpers), that one with a wrong password, without
// SASL or without trusting the CA does not, and that a Stop/Start keeps
// all of it, with the same certificate.
func TestSecurity(t *testing.T) {
	for _, tc := range []struct {
		name string
		sasl *kafkatest.SASL
		tls  bool
	}{
		{"plain", &kafkatest.SASL{Mechanism: "PLAIN", User: "alice", Password: "pw-plain"}, false},
		{"plain+tls", &kafkatest.SASL{Mechanism: "PLAIN", User: "alice", Password: "pw-plain"}, true},
		{"scram256", &kafkatest.SASL{Mechanism: "SCRAM-SHA-256", User: "bob", Password: "pw:256"}, false},
		{"scram256+tls", &kafkatest.SASL{Mechanism: "SCRAM-SHA-256", User: "bob", Password: "pw:256"}, true},
		{"scram512", &kafkatest.SASL{Mechanism: "SCRAM-SHA-512", User: "carol", Password: "pw-512"}, false},
		{"scram512+tls", &kafkatest.SASL{Mechanism: "SCRAM-SHA-512", User: "carol", Password: "pw-512"}, true},
		{"tls", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			br := kafkatest.Start(t, kafkatest.Options{Topics: map[string]int{"t": 1}, SASL: tc.sasl, TLS: tc.tls})
			if got := br.CAFile(); (got != "") != tc.tls {
				t.Fatalf("CAFile() = %q with TLS %v", got, tc.tls)
			}
			var caPEM []byte
			if tc.tls {
				var err error
				if caPEM, err = os.ReadFile(br.CAFile()); err != nil {
					t.Fatal(err)
				}
			}

			good := secureClient(t, br, tc.sasl, br.CAFile())
			produce(ctx, t, good, "g0", "g1")
			br.Produce(t, "t", []string{"k0", "k1"}, false)
			want := []string{"g0", "g1", "k0", "k1"}
			if got := readCommitted(ctx, t, br, "t", "k1", securityOpts(t, br, tc.sasl, br.CAFile())...); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("franz-go read %v, want %v", got, want)
			}
			if got := br.ReadCommitted(t, "t", "%s"); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("kcat read %v, want %v", got, want)
			}

			if tc.sasl != nil {
				wrong := *tc.sasl
				wrong.Password += "x"
				err := refused(t, br, &wrong, br.CAFile())
				if !errors.Is(err, kerr.SaslAuthenticationFailed) {
					t.Errorf("wrong password: %v, want an authentication error", err)
				}
				refused(t, br, nil, br.CAFile()) // without SASL
			}
			if tc.tls {
				err := refused(t, br, tc.sasl, "")
				if _, ok := errors.AsType[*tls.CertificateVerificationError](err); !ok {
					t.Errorf("client not trusting the CA: %v, want a certificate verification error", err)
				}
			}

			br.Stop()
			br.Start()
			if tc.tls {
				if again, err := os.ReadFile(br.CAFile()); err != nil || !bytes.Equal(again, caPEM) {
					t.Fatalf("the certificate changed across the restart (err %v)", err)
				}
			}
			// The client from before the restart reconnects.
			produce(ctx, t, good, "r0")
			br.Produce(t, "t", []string{"r1"}, false)
			want = append(want, "r0", "r1")
			if got := br.ReadCommitted(t, "t", "%s"); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("kcat read after restart %v, want %v", got, want)
			}
			if tc.sasl != nil {
				wrong := *tc.sasl
				wrong.Password += "x"
				if err := refused(t, br, &wrong, br.CAFile()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
					t.Errorf("wrong password after the restart: %v, want an authentication error", err)
				}
			}
		})
	}
}

// TestSecurityOwnClients checks eddy-kafka's own clients under SASL and
// TLS: the one creating topics a restart asks for anew and the one writing
// the abort marker of a transaction left open by a kill. The data
// directory was first written without SASL, so the users of the flags must
// win over those kfake saved there.
func TestSecurityOwnClients(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	open := kafkatest.Start(t, kafkatest.Options{DataDir: dir, Topics: map[string]int{"t": 1}})
	produce(ctx, t, client(t, open), "p0")
	open.Stop()

	user := &kafkatest.SASL{Mechanism: "SCRAM-SHA-512", User: "dave", Password: "pw"}
	br := kafkatest.Start(t, kafkatest.Options{DataDir: dir, Topics: map[string]int{"t": 1, "new": 2}, SASL: user, TLS: true})
	cl := secureClient(t, br, user, br.CAFile())
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "new", Value: []byte("n0")}).FirstErr(); err != nil {
		t.Fatalf("produce to the topic created at the restart: %v", err)
	}

	txn := secureClient(t, br, user, br.CAFile(), kgo.TransactionalID("tx"))
	transaction(ctx, t, txn, kgo.TryCommit, "c0")
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(ctx, t, txn, "open")
	br.Kill()
	br.Start() // fails if eddy-kafka cannot write the abort marker
	txn.Close()
	after := secureClient(t, br, user, br.CAFile(), kgo.TransactionalID("tx"))
	transaction(ctx, t, after, kgo.TryCommit, "end")
	want := []string{"p0", "c0", "end"}
	if got := readCommitted(ctx, t, br, "t", "end", securityOpts(t, br, user, br.CAFile())...); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("read_committed after the kill: got %v, want %v", got, want)
	}
}

// secureClient is client with SASL as user (nil: none) and TLS trusting
// caFile ("" and br has TLS: trusting nothing).
func secureClient(t *testing.T, br *kafkatest.Broker, user *kafkatest.SASL, caFile string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return client(t, br, append(securityOpts(t, br, user, caFile), opts...)...)
}

func securityOpts(t *testing.T, br *kafkatest.Broker, user *kafkatest.SASL, caFile string) []kgo.Opt {
	t.Helper()
	var opts []kgo.Opt
	if user != nil {
		var m sasl.Mechanism
		switch user.Mechanism {
		case "PLAIN":
			m = plain.Auth{User: user.User, Pass: user.Password}.AsMechanism()
		case "SCRAM-SHA-256":
			m = scram.Auth{User: user.User, Pass: user.Password}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			m = scram.Auth{User: user.User, Pass: user.Password}.AsSha512Mechanism()
		default:
			t.Fatalf("mechanism %q", user.Mechanism)
		}
		opts = append(opts, kgo.SASL(m))
	}
	if br.CAFile() != "" {
		roots := x509.NewCertPool()
		if caFile != "" {
			ca, err := os.ReadFile(caFile)
			if err != nil {
				t.Fatal(err)
			}
			if !roots.AppendCertsFromPEM(ca) {
				t.Fatalf("no certificate in %s", caFile)
			}
		}
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: roots}))
	}
	return opts
}

// refused returns the error of a Ping (a metadata request) by a client
// with these credentials, which must fail, and at once: the bound is a
// few seconds where a client that took the refusal for a network error
// would keep retrying.
func refused(t *testing.T, br *kafkatest.Broker, user *kafkatest.SASL, caFile string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl := secureClient(t, br, user, caFile)
	err := cl.Ping(ctx)
	if err == nil {
		t.Fatalf("produce with user %+v, CA %q got through", user, caFile)
	}
	return err
}

// TestFlagErrors checks that eddy-kafka refuses bad --sasl and --tls-*
// values with one line on stderr that does not repeat the password.
func TestFlagErrors(t *testing.T) {
	bin, err := kafkatest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no password", []string{"--sasl", "PLAIN:alice"}, "want MECHANISM:USER:PASSWORD"},
		{"mechanism", []string{"--sasl", "MD5:alice:secret"}, `mechanism "MD5"`},
		{"empty user", []string{"--sasl", "PLAIN::secret"}, "empty user"},
		{"empty password", []string{"--sasl", "SCRAM-SHA-256:alice:"}, "empty password"},
		{"twice", []string{"--sasl", "PLAIN:alice:secret", "--sasl", "plain:alice:secret2"}, "given twice"},
		{"cert without key", []string{"--tls-cert", "cert.pem"}, "go together"},
		{"no such cert", []string{"--tls-cert", "nonexistent.pem", "--tls-key", "nonexistent.key"}, "nonexistent.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The bound is for a value taken by mistake: eddy-kafka would run.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var stderr strings.Builder
			cmd := exec.CommandContext(ctx, bin, append([]string{"--ports", "65535"}, tc.args...)...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			msg := stderr.String()
			if err == nil || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) || strings.Contains(msg, "secret") {
				t.Errorf("eddy-kafka %v: %v, stderr %q; want one line with %q, no password", tc.args, err, msg, tc.want)
			}
		})
	}
}
