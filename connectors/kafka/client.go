package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
)

// openTimeout bounds how long Open waits for the cluster to
// answer (retrying with backoff meanwhile) before failing the task, which
// the job's restart strategy then retries.
const openTimeout = 30 * time.Second

// kafkaBackoff is the client's retry backoff: 200 ms doubling up to 5 s (kgo counts tries from 1).
func kafkaBackoff(tries int) time.Duration {
	return min(100*time.Millisecond<<min(tries, 6), 5*time.Second)
}

// Security is how a client authenticates (SASL) and encrypts (TLS); the
// zero value does neither.
type Security struct {
	SASL *jobspec.KafkaSASL
	TLS  *jobspec.KafkaTLS
}

// options turns sec into client options, reading the SASL password from
// the environment variable the spec names, on this worker.
func (sec Security) options() ([]kgo.Opt, error) {
	var out []kgo.Opt
	if t := sec.TLS; t != nil {
		// Without a ServerName the client checks each broker's
		// certificate against the broker's host.
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
		if t.CAFile != "" {
			pem, err := os.ReadFile(t.CAFile)
			if err != nil {
				return nil, fmt.Errorf("tls.ca_file: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("tls.ca_file %s holds no PEM certificate", t.CAFile)
			}
		}
		out = append(out, kgo.DialTLSConfig(cfg))
	}
	if a := sec.SASL; a != nil {
		pass, ok := os.LookupEnv(a.PasswordEnv)
		if !ok {
			return nil, fmt.Errorf("sasl: the environment variable %s (password_env) is not set on this worker", a.PasswordEnv)
		}
		var mech sasl.Mechanism
		switch a.Mechanism {
		case jobspec.SASLPlain:
			mech = plain.Auth{User: a.Username, Pass: pass}.AsMechanism()
		case jobspec.SASLScramSHA256:
			mech = scram.Auth{User: a.Username, Pass: pass}.AsSha256Mechanism()
		case jobspec.SASLScramSHA512:
			mech = scram.Auth{User: a.Username, Pass: pass}.AsSha512Mechanism()
		default:
			return nil, fmt.Errorf("sasl: unknown mechanism %q", a.Mechanism)
		}
		out = append(out, kgo.SASL(mech))
	}
	return out, nil
}

// dialCluster returns a client for brokers with Eddy's retry backoff and
// sec's authentication and encryption.
func dialCluster(brokers []string, sec Security, opts ...kgo.Opt) (*kgo.Client, error) {
	secOpts, err := sec.options()
	if err != nil {
		return nil, err
	}
	base := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.RetryBackoffFn(kafkaBackoff)}
	return kgo.NewClient(append(append(base, secOpts...), opts...)...)
}

// refused reports an error that retrying cannot fix: the credentials or
// the certificates are wrong, or the principal may not do this.
func refused(err error) bool {
	var (
		unknownCA x509.UnknownAuthorityError
		host      x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		record    tls.RecordHeaderError
	)
	return errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.UnsupportedSaslMechanism) ||
		errors.Is(err, kerr.IllegalSaslState) || errors.Is(err, kerr.TopicAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.As(err, &unknownCA) || errors.As(err, &host) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &record)
}

// retryWhileUnreachable calls f until it succeeds, fails with an error that
// retrying cannot fix (permanent reports which), or ctx ends; waits grow
// from 100 ms to 2 s. The last error is returned.
func retryWhileUnreachable[T any](ctx context.Context, permanent func(error) bool, f func(context.Context) (T, error)) (T, error) {
	wait := 100 * time.Millisecond
	for {
		v, err := f(ctx)
		if err == nil || permanent(err) || ctx.Err() != nil {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// topicMeta is what metadata says of a topic.
type topicMeta struct {
	name       string
	id         [16]byte
	internal   bool
	partitions []int32
}

// describeTopics asks for topics (every topic when topics is nil),
// retrying while no broker answers until ctx ends; an unknown topic fails
// at once with ErrUnknownTopic.
func describeTopics(ctx context.Context, cl *kgo.Client, brokers, topics []string) ([]topicMeta, error) {
	permanent := func(err error) bool { return errors.Is(err, ErrUnknownTopic) || refused(err) }
	return retryWhileUnreachable(ctx, permanent, func(ctx context.Context) ([]topicMeta, error) {
		req := kmsg.NewPtrMetadataRequest()
		if topics != nil {
			req.Topics = []kmsg.MetadataRequestTopic{}
		}
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, fmt.Errorf("metadata from %v: %w", brokers, err)
		}
		var out []topicMeta
		for _, t := range resp.Topics {
			m := topicMeta{id: t.TopicID, internal: t.IsInternal}
			if t.Topic != nil {
				m.name = *t.Topic
			}
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				if errors.Is(err, kerr.UnknownTopicOrPartition) {
					return nil, fmt.Errorf("%w %q", ErrUnknownTopic, m.name)
				}
				return nil, fmt.Errorf("topic %q: %w", m.name, err)
			}
			for _, p := range t.Partitions {
				m.partitions = append(m.partitions, p.Partition)
			}
			out = append(out, m)
		}
		return out, nil
	})
}
