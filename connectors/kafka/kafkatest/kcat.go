package kafkatest

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Kcat returns the path of kcat (Debian's package kcat, a librdkafka
// client independent of franz-go), skipping the test when it is missing.
func Kcat(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		t.Skip("kcat not installed (apt-get install kcat; .ci/run does)")
	}
	return p
}

// Produce writes lines to topic with kcat; a line KEY:VALUE has a key.
func (b *Broker) Produce(t testing.TB, topic string, lines []string, keyed bool) {
	t.Helper()
	if err := b.ProduceLines(Kcat(t), topic, lines, keyed); err != nil {
		t.Fatal(err)
	}
}

// ProduceLines is Produce for any goroutine: kcat is kcat's path (Kcat).
// kcat waits for the broker while it is down, up to a minute.
func (b *Broker) ProduceLines(kcat, topic string, lines []string, keyed bool) error {
	args := append([]string{"-P", "-b", b.Bootstrap(), "-t", topic}, b.kcatSecurity()...)
	if keyed {
		args = append(args, "-K", ":")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kcat -P %s: %v\n%s", topic, err, out)
	}
	return nil
}

// ReadCommitted reads topic from its start to its end with kcat and
// isolation.level=read_committed: one line per record, formatted by
// format (kcat -f, without the newline: "%s" is the value, "%k" the key).
func (b *Broker) ReadCommitted(t testing.TB, topic, format string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"-C", "-b", b.Bootstrap(), "-t", topic, "-o", "beginning", "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", format + `\n`}, b.kcatSecurity()...)
	cmd := exec.CommandContext(ctx, Kcat(t), args...)
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("kcat -C %s: %v\n%s", topic, err, msg)
	}
	s := strings.TrimSuffix(string(out), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// kcatSecurity returns kcat's (librdkafka's) settings for the broker's
// SASL and TLS. librdkafka verifies the broker's host name too
// (ssl.endpoint.identification.algorithm=https, its default): the test
// certificate names 127.0.0.1.
func (b *Broker) kcatSecurity() []string {
	var args []string
	switch {
	case b.opts.SASL != nil && b.opts.TLS:
		args = append(args, "-X", "security.protocol=SASL_SSL")
	case b.opts.SASL != nil:
		args = append(args, "-X", "security.protocol=SASL_PLAINTEXT")
	case b.opts.TLS:
		args = append(args, "-X", "security.protocol=SSL")
	}
	if u := b.opts.SASL; u != nil {
		args = append(args, "-X", "sasl.mechanisms="+u.Mechanism, "-X", "sasl.username="+u.User, "-X", "sasl.password="+u.Password)
	}
	if b.opts.TLS {
		args = append(args, "-X", "ssl.ca.location="+b.CAFile())
	}
	return args
}
